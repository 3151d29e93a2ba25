package enginetest_test

import (
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/engine/storetest"
)

func TestStoreKeepsTheStorePromises(t *testing.T) {
	storetest.Run(t, func(*testing.T) engine.Store { return enginetest.NewStore() })
}
