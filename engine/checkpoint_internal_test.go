package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// sameCheckpoint checks that decoding doc without its outbox, then the
// outbox, gives what decoding it whole gives, and fails where that fails.
func sameCheckpoint(t *testing.T, doc []byte) {
	t.Helper()
	var eager Checkpoint
	eagerErr := json.Unmarshal(doc, &eager)
	lazy, err := decodeCheckpoint(doc)
	if err == nil {
		err = lazy.loadOutbox()
	}
	if (err == nil) != (eagerErr == nil) {
		t.Fatalf("%q: decoded in two steps: %v; whole: %v", doc, err, eagerErr)
	}
	if err != nil {
		return
	}
	want, _ := json.Marshal(&eager)
	got, _ := json.Marshal(lazy)
	if string(got) != string(want) {
		t.Fatalf("%q: decoded in two steps\n%s\nwhole\n%s", doc, got, want)
	}
}

func checkpointDoc(t testing.TB) []byte {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	cp := &Checkpoint{Flow: "bench", Run: "r-1", Status: Waiting, State: Doc{"a": json.RawMessage(`{"outbox":[1]}`)}, UID: "u", Seq: 2, Node: "ask",
		Interrupt: &Interrupt{RequestID: "rq_1", Node: "ask", Kind: KindQuestion, Fields: []string{"answer"}, AskedAt: at},
		Applied:   []string{"e-1"}, Waited: true, CreatedAt: at, UpdatedAt: at,
		Outbox: []Message{
			{Stream: AuditStream, Kind: protocol.ActionStarted, ID: "u-1", Flow: "bench", Run: "r-1", Time: at, Data: &protocol.AuditRecord{Flow: "bench", Run: "r-1", Action: protocol.ActionStarted, At: at, Seq: 1, Hash: "h"}},
			{Stream: EventStream, Kind: protocol.EventInterrupted, ID: "u-2", Flow: "bench", Run: "r-1", Time: at, Data: &protocol.Interrupted{Flow: "bench", Run: "r-1", Node: "ask", RequestID: "rq_1", Kind: KindQuestion,
				Questions: []protocol.Question{{Field: "answer", Question: `Go "ahead"? \ [}`}}}},
		}}
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestACheckpointDecodesTheSameWithItsOutboxLeftForLater(t *testing.T) {
	doc := string(checkpointDoc(t))
	for _, d := range []string{
		doc, `{}`, `{"outbox":null}`, `{"outbox":[]}`, `{"outbox":}`, `{"outbox":tru}`, `{"outbox":[{]}`, `{"outbox":[],"outbox":[]}`,
		`{"Outbox":[],"outbox":[]}`, `{"outb\u006fx":[]}`, `{"outbox":[]} x`, `{"outbox":[],}`, `{"outbox":[]`, `{"outbox"`, `[]`, ``,
		` { "flow" : "f" , "outbox" : [ ] , "waited" : true } `, `{"outbox":[{"stream":"events","kind":"nope","data":{}}]}`,
		`{"outbox":"[]"}`, `{"outbox":5}`, `{"state":{"outbox":[1]},"outbox":[]}`,
	} {
		sameCheckpoint(t, []byte(d))
	}
}

// FuzzDecodeCheckpoint holds decoding a checkpoint without its outbox,
// then the outbox, to decoding it whole.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(checkpointDoc(f))
	f.Add([]byte(`{"outbox":[],"Outbox":null}`))
	f.Add([]byte(`{"outbox":[{"stream":"audit","kind":"started","data":{"seq":1}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		sameCheckpoint(t, doc)
	})
}

// TestEveryEventKindOfAnOutboxReadsBack checks that a checkpoint's outbox,
// written before its events were published, reads back whatever event it
// holds: a worker that stopped between the write and the publish finishes
// the publish after its restart (an ask's answered and a tool call's
// consumed events included).
func TestEveryEventKindOfAnOutboxReadsBack(t *testing.T) {
	t.Parallel()
	for _, kind := range protocol.Events() {
		d, err := newEventData(EventStream, kind)
		if err != nil || d == nil {
			t.Errorf("%s: %v, want a data type", kind, err)
		}
	}
}
