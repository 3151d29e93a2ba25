package mail

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryInterruptKindHasAView(t *testing.T) {
	for _, k := range protocol.Kinds() {
		if v, ok := kindViews[k]; !ok || v.noun == "" || v.verb == "" || v.button == "" || v.heading == nil {
			t.Errorf("kind %s has no complete view in kinds.go: a mail cannot present it", k)
		}
	}
	for k := range kindViews {
		if _, ok := protocol.SpecOf(k); !ok {
			t.Errorf("kinds.go has a view of %q, which is no kind of protocol.Kinds", k)
		}
	}
}
