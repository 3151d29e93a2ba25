package events_test

import (
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

// TestKindsHaveTypes checks that every event kind has a CloudEvent type and
// that the constants are the protocol's subject tokens.
func TestKindsHaveTypes(t *testing.T) {
	t.Parallel()
	want := []string{"started", "interrupted", "resumed", "completed", "failed", "cancelled", "expired", "refused", "decided", "assigned", "voted", "reminded", "answered", "consumed"}
	got := protocol.Events()
	if len(got) != len(want) {
		t.Fatalf("Kinds() = %v, want %v", got, want)
	}
	for i, k := range got {
		if k != want[i] {
			t.Errorf("Kinds()[%d] = %q, want %q", i, k, want[i])
		}
		if _, ok := protocol.OutboundType(k); !ok {
			t.Errorf("kind %q has no outbound type", k)
		}
	}
}
