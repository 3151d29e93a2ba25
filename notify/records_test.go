package notify_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
)

func TestARecordIsWrittenOnlyFromTheRevisionItWasReadAt(t *testing.T) {
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "records"})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct{ Posted []string }
	rs := notify.NewRecords[rec](kv, "the test bucket")
	key := notify.RecordKey("refund", "r-1")
	if r, rev, err := rs.Get(t.Context(), key); err != nil || rev != 0 || r.Posted != nil {
		t.Fatalf("no record yet: %+v, %d, %v", r, rev, err)
	}
	if err := rs.Put(t.Context(), key, rec{Posted: []string{"C1"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := rs.Put(t.Context(), key, rec{Posted: []string{"C2"}}, 0); err == nil {
		t.Fatal("a second create of one record succeeded; one of two racing writes must fail")
	}
	r, rev, err := rs.Get(t.Context(), key)
	if err != nil || rev == 0 || len(r.Posted) != 1 || r.Posted[0] != "C1" {
		t.Fatalf("record = %+v, %d, %v", r, rev, err)
	}
	if err := rs.Put(t.Context(), key, rec{Posted: []string{"C1", "C3"}}, rev); err != nil {
		t.Fatal(err)
	}
	if err := rs.Put(t.Context(), key, rec{Posted: []string{"C4"}}, rev); err == nil {
		t.Fatal("a write from a stale revision succeeded")
	}
}
