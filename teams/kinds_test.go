package teams

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryInterruptKindHasAView(t *testing.T) {
	for _, k := range protocol.Kinds() {
		if v, ok := kindViews[k]; !ok || v.body == nil {
			t.Errorf("kind %s has no complete view in kinds.go: a card cannot present it", k)
		}
	}
	for k := range kindViews {
		if _, ok := protocol.SpecOf(k); !ok {
			t.Errorf("kinds.go has a view of %q, which is no kind of protocol.Kinds", k)
		}
	}
}
