package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// TestDecodeCheckpointReadsTheEngineDocument writes a checkpoint the way
// the engine stores it, internal fields included, and reads it back with
// the public reader type.
func TestDecodeCheckpointReadsTheEngineDocument(t *testing.T) {
	t.Parallel()
	asked := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	expires := asked.Add(time.Hour)
	doc, err := json.Marshal(&engine.Checkpoint{
		Flow: "booking", Run: "r-42", Status: engine.Waiting, Node: "ask_contact",
		State: engine.Doc{"name": json.RawMessage(`"Ann"`)},
		Interrupt: &engine.Interrupt{
			RequestID: "rq_1", Node: "ask_contact", Index: 1, Kind: protocol.KindQuestion,
			Questions: []engine.Question{{Field: "phone", Question: "Your phone?", Context: "digits"}},
			Fields:    []string{"name", "phone"}, Context: "Ask both.",
			Answers: map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)},
			AskedAt: asked, ExpiresAt: &expires,
		},
		CreatedAt: asked.Add(-time.Minute), UpdatedAt: asked,
		Origin:  json.RawMessage(`{"slack":{"channel":"C1"}}`),
		Resumes: []json.RawMessage{json.RawMessage(`{}`)},
		Steps:   map[string]json.RawMessage{"charge": json.RawMessage(`1`)},
		Cause:   &engine.Cause{ID: "ev-1", Key: "k-1", Seq: 9},
		Applied: []string{"ev-0", "k-1"}, UID: "u1", Seq: 4,
		Outbox: []engine.Message{{Stream: engine.EventStream, Kind: "interrupted", ID: "x"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := protocol.DecodeCheckpoint(doc, 7)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Flow != "booking" || cp.Run != "r-42" || cp.Status != protocol.StatusWaiting || cp.Node != "ask_contact" || cp.Checkpoint != 7 {
		t.Errorf("header fields: %+v", cp)
	}
	if string(cp.State) != `{"name":"Ann"}` || string(cp.Origin) != `{"slack":{"channel":"C1"}}` {
		t.Errorf("state %s, origin %s", cp.State, cp.Origin)
	}
	in := cp.Interrupt
	if in == nil || in.Kind != "question" || in.RequestID != "rq_1" || in.Node != "ask_contact" ||
		len(in.Questions) != 1 || in.Questions[0].Field != "phone" || in.Questions[0].Context != "digits" ||
		strings.Join(in.Fields, ",") != "name,phone" || in.Context != "Ask both." ||
		!in.AskedAt.Equal(asked) || in.ExpiresAt == nil || !in.ExpiresAt.Equal(expires) {
		t.Errorf("interrupt: %+v", in)
	}
	if !cp.Waiting() || cp.Finished() || !cp.HasApplied("k-1") || cp.HasApplied("k-2") || cp.HasApplied("") {
		t.Errorf("Waiting %v, Finished %v, applied %v", cp.Waiting(), cp.Finished(), cp.Applied)
	}
	// The reader's JSON holds no engine internals.
	out, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Cause == nil || cp.Cause.ID != "ev-1" || cp.Cause.Key != "k-1" {
		t.Errorf("cause %+v, want the last transition's command", cp.Cause)
	}
	for _, internal := range []string{"outbox", "steps", "resumes", "uid", `"seq"`, `"answers"`, `"index"`} {
		if strings.Contains(string(out), internal) {
			t.Errorf("re-encoded checkpoint holds %s: %s", internal, out)
		}
	}
}

func TestDecodeCheckpointRefusesWhatIsNotOne(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc string
		wantErr   string
	}{
		{"not JSON", `nope`, "not a checkpoint document"},
		{"a list", `[1,2]`, "not a checkpoint document"},
		{"no status", `{"flow":"a","run":"b"}`, "lacks flow, run or status"},
		{"a pending entry", `{"flow":"a","run":"b","node":"n","requestId":"r"}`, "lacks flow, run or status"},
		{"finished", `{"flow":"a","run":"b","status":"completed","state":{}}`, ""},
	}
	for _, tc := range cases {
		cp, err := protocol.DecodeCheckpoint([]byte(tc.doc), 3)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr == "" && !cp.Finished():
			t.Errorf("%s: not finished: %+v", tc.name, cp)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
