package events_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// TestPendingReadsWhatTheEngineWrites keeps protocol.Pending, the readers'
// type, in step with protocol.Pending, the writer's: every field the engine
// writes decodes strictly, and encodes back to the same JSON.
func TestPendingReadsWhatTheEngineWrites(t *testing.T) {
	t.Parallel()
	asked := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	expires := asked.Add(time.Hour)
	written := protocol.Pending{
		Flow: "refund", Run: "r-42", Node: "approve", RequestID: "rq-1", Kind: "approval",
		Checkpoint: 7, Fields: []string{"amount"}, Question: "Refund 400 EUR?",
		ApproverRole: "finance", Action: "issue_refund", AskedAt: asked, ExpiresAt: &expires,
		Assignees: []string{"ana", "role:legal"}, ClaimedBy: "ana", Title: "Refund 400 EUR", Requester: "support-bot",
		KeyArgs: []protocol.KeyArg{{Name: "amount", Title: "Amount", Text: "€400.00"}}, OnTimeout: &protocol.Policy{Action: "escalate", ApproverRole: "finance_lead", Timeout: "30m0s"},
		Quorum: &protocol.Quorum{Required: 2}, Voters: []string{"cem"}, RemindedAt: &asked, StartedBy: "support-bot", FlowVersion: "s-3f9c2a81b07d",
	}
	v := reflect.ValueOf(written)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("protocol.Pending.%s is not set in this test: set it so the JSON below covers it", v.Type().Field(i).Name)
		}
	}
	b, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var read protocol.Pending
	if err := dec.Decode(&read); err != nil {
		t.Fatalf("protocol.Pending cannot read %s: %v", b, err)
	}
	again, err := json.Marshal(read)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("protocol.Pending encodes\n%s\nthe engine wrote\n%s", again, b)
	}
	dec = json.NewDecoder(bytes.NewReader(again))
	dec.DisallowUnknownFields()
	var back protocol.Pending
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("protocol.Pending cannot read %s: %v", again, err)
	}
	if !reflect.DeepEqual(back, written) {
		t.Errorf("round trip = %+v, want %+v", back, written)
	}
}
