package mcpserver

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryInterruptKindHasAView(t *testing.T) {
	for _, k := range protocol.Kinds() {
		if v, ok := kindViews[k]; !ok || v.next == "" || v.answer == "" {
			t.Errorf("kind %s has no complete view in kinds.go: the model is not told how to answer it", k)
		} else if (v.form == nil) != (v.fromForm == nil) {
			t.Errorf("kind %s has a form but no reading of it, or a reading but no form", k)
		}
	}
	for k := range kindViews {
		if _, ok := protocol.SpecOf(k); !ok {
			t.Errorf("kinds.go has a view of %q, which is no kind of protocol.Kinds", k)
		}
	}
}
