package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// TestAuditRecordReadsEveryFieldTheEngineWrites decodes a record with
// every field set, strictly, into the readers' type.
func TestAuditRecordReadsEveryFieldTheEngineWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rec := protocol.AuditRecord{
		Flow: "refund", Run: "r-1", Action: protocol.ActionEdited, At: at, By: "sam", Source: "/s", EventID: "e",
		Node: "review", RequestID: "rq", Kind: protocol.KindApproval, Trusted: true, Reason: "r", Replaces: "rq0", ApproverRole: "finance_lead",
		EscalatedFrom: "supervisor", Timeout: true, ExpiresAt: &at, Code: "c",
		Approval: &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"a":1}`), Edits: json.RawMessage(`{"a":2}`), Final: json.RawMessage(`{"a":2}`)},
		Outcome:  &protocol.AuditOutcome{Status: engine.Failed, Node: "n", RequestID: "rq", Kind: "question", Error: "e"},
		Seq:      3, Prev: "p", Side: true, Hash: "h",
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]any
	_ = json.Unmarshal(data, &all)
	if len(all) != 24 {
		t.Fatalf("the engine's record has %d fields, this test sets 24: set the new ones", len(all))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r protocol.AuditRecord
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("protocol.AuditRecord misses a field of the engine's record: %v", err)
	}
	back, _ := json.Marshal(r)
	if !bytes.Equal(back, data) {
		t.Errorf("read and written again, the record changed:\n got %s\nwant %s", back, data)
	}
}

const editedRecord = `{"flow":"refund","run":"r-1","action":"edited","at":"2026-11-21T10:30:00.5Z","by":"sam","node":"review",` +
	`"kind":"approval","reason":"partial","approverRole":"supervisor",` +
	`"approval":{"action":"issue_refund","args":{"amount":4800,"orderId":"o-1"},"edits":{"amount":400},"final":{"amount":400,"orderId":"o-1"}},` +
	`"outcome":{"status":"completed","node":"issue_refund"},"seq":5,"prev":"ab12","hash":"cd34","future":true}`

func TestDecodeAuditRecord(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		data    string
		wantErr string
		check   func(t *testing.T, r protocol.AuditRecord)
	}{
		{name: "an edit", data: editedRecord, check: func(t *testing.T, r protocol.AuditRecord) {
			if r.Action != protocol.ActionEdited || r.By != "sam" || r.Seq != 5 || r.Prev != "ab12" || r.Hash != "cd34" || r.Side ||
				r.Approval == nil || string(r.Approval.Final) != `{"amount":400,"orderId":"o-1"}` || string(r.Approval.Edits) != `{"amount":400}` ||
				r.Outcome == nil || r.Outcome.Status != protocol.StatusCompleted || r.At.Nanosecond() != 5e8 {
				t.Errorf("decoded %+v", r)
			}
			if string(r.Data) != editedRecord {
				t.Errorf("Data is %s, not the record as given", r.Data)
			}
		}},
		{
			name: "a refusal", data: `{"flow":"refund","run":"r-1","action":"refused","at":"2026-11-21T10:30:00Z","code":"invalid_answer","reason":"no","side":true,"prev":"ab12","hash":"ef"}`,
			check: func(t *testing.T, r protocol.AuditRecord) {
				if !r.Side || r.Seq != 0 || r.Code != "invalid_answer" || r.Reason != "no" {
					t.Errorf("decoded %+v", r)
				}
			},
		},
		{name: "no action", data: `{"flow":"refund","run":"r-1"}`, wantErr: "has no action"},
		{name: "null", data: `null`, wantErr: "has no action"},
		{name: "not an object", data: `[1]`, wantErr: "not a JSON object"},
		{name: "a wrong type", data: `{"action":"started","seq":"one"}`, wantErr: "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := protocol.DecodeAuditRecord([]byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

// FuzzDecodeAuditRecord decodes arbitrary record data: it either fails or
// keeps the bytes it was given.
func FuzzDecodeAuditRecord(f *testing.F) {
	f.Add([]byte(editedRecord))
	f.Add([]byte(`{"action":"refused","side":true}`))
	f.Add([]byte(`{"action":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := protocol.DecodeAuditRecord(data)
		if err != nil {
			return
		}
		if r.Action == "" || !bytes.Equal(r.Data, data) || !json.Valid(data) {
			t.Fatalf("decoded %q into %+v", data, r)
		}
	})
}
