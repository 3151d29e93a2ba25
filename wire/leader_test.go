package wire_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/wire"
)

// TestLeaderMsgReadsAMessageWithItsHeadersBySequenceOrLastOnItsSubject
// reads what a stream that allows direct gets holds through its leader
// instead: the data, the headers as sent, by sequence and as the last on
// its subject, and not found for a sequence or a subject it does not hold.
func TestLeaderMsgReadsAMessageWithItsHeadersBySequenceOrLastOnItsSubject(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "LEADER", Subjects: []string{"leader.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{"first", "second"} {
		m := nats.NewMsg("leader.a")
		m.Data = []byte(data)
		m.Header.Set("KV-Operation", "PURGE")
		m.Header.Add("Interlock-Test", "one")
		m.Header.Add("Interlock-Test", "two")
		if i == 0 {
			m.Header = nats.Header{}
		}
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	first, err := wire.LeaderMsg(t.Context(), nc, "LEADER", 1, "")
	if err != nil || string(first.Data) != "first" || first.Sequence != 1 || first.Subject != "leader.a" || len(first.Header) != 0 {
		t.Fatalf("message 1: %+v, %v", first, err)
	}
	last, err := wire.LeaderMsg(t.Context(), nc, "LEADER", 0, "leader.a")
	if err != nil || string(last.Data) != "second" || last.Sequence != 2 {
		t.Fatalf("last on leader.a: %+v, %v", last, err)
	}
	if got := last.Header.Get("KV-Operation"); got != "PURGE" {
		t.Errorf("header KV-Operation %q, want PURGE as sent", got)
	}
	if got := last.Header.Values("Interlock-Test"); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Errorf("header Interlock-Test %q, want both values", got)
	}
	for _, miss := range []struct {
		seq  uint64
		last string
	}{{seq: 9}, {last: "leader.b"}} {
		if _, err := wire.LeaderMsg(t.Context(), nc, "LEADER", miss.seq, miss.last); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("%+v: %v, want ErrMsgNotFound", miss, err)
		}
	}
	if _, err := wire.LeaderMsg(t.Context(), nc, "NO_SUCH_STREAM", 1, ""); err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a stream that does not exist: %v, want JetStream's error saying so", err)
	}
}

// TestLeaderKVReadsAValueAndTakesMarkersForNone reads a KV key through
// its stream's leader: its value and revision, and not found once it is
// deleted or purged (the markers), or when it was never written.
func TestLeaderKVReadsAValueAndTakesMarkersForNone(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(t.Context(), "a.b", []byte("waiting"))
	if err != nil {
		t.Fatal(err)
	}
	if got, grev, err := wire.LeaderKV(t.Context(), nc, "leader", "a.b"); err != nil || string(got) != "waiting" || grev != rev {
		t.Fatalf("a.b: %q at %d, %v; want waiting at %d", got, grev, err, rev)
	}
	for _, remove := range []func(string) error{
		func(k string) error { return kv.Delete(t.Context(), k) },
		func(k string) error { return kv.Purge(t.Context(), k) },
	} {
		if _, err := kv.Put(t.Context(), "c", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := remove("c"); err != nil {
			t.Fatal(err)
		}
		if got, _, err := wire.LeaderKV(t.Context(), nc, "leader", "c"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("a removed key: %q, %v; want ErrKeyNotFound", got, err)
		}
	}
	if _, _, err := wire.LeaderKV(t.Context(), nc, "leader", "never"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a key never written: %v; want ErrKeyNotFound", err)
	}
}
