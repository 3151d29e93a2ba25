package main

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryInterruptKindHasAView(t *testing.T) {
	for _, k := range protocol.Kinds() {
		v, ok := kindViews[k]
		if !ok || v.what == nil || v.show == nil || v.answers == nil || v.reasked == nil || v.ask == nil {
			t.Errorf("kind %s has no complete view in kinds.go: the command line cannot show it, say how to answer it, or ask it", k)
		}
	}
	for k := range kindViews {
		if _, ok := protocol.SpecOf(k); !ok {
			t.Errorf("kinds.go has a view of %q, which is no kind of protocol.Kinds", k)
		}
	}
}
