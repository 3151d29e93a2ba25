package bus_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// auditKey returns a distinct audit public key for n.
func auditKey(n byte) protocol.AuditKey {
	pub := make([]byte, ed25519.PublicKeySize)
	pub[0] = n
	return protocol.AuditKey{Kid: protocol.AuditKeyID(pub), PublicKey: base64.StdEncoding.EncodeToString(pub), Since: time.Date(2026, 11, 21, 10, 0, int(n), 0, time.UTC)}
}

func kids(keys []protocol.AuditKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Kid
	}
	return out
}

// TestPublishAuditKeyOnlyAddsKeys starts workers of two secrets at once,
// again and again, and checks that the list ends with each key once, in
// the order first published, that a new secret adds its key without
// removing the old one, and that clients may read the list but not write
// it.
func TestPublishAuditKeyOnlyAddsKeys(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n := wire.Names{Prefix: wire.DefaultPrefix}
	if err := bus.Provision(t.Context(), js, n, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	a, b, c := auditKey(1), auditKey(2), auditKey(3)

	// Eight workers start together, half with each secret.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		key := a
		if i%2 == 1 {
			key = b
		}
		wg.Go(func() {
			_, err := bus.PublishAuditKey(t.Context(), js, n, key)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(t.Context(), n.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	read := func() []protocol.AuditKey {
		t.Helper()
		e, err := kv.Get(t.Context(), protocol.AuditKeysKey)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := protocol.DecodeAuditKeys(e.Value())
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	got := kids(read())
	slices.Sort(got)
	if want := []string{a.Kid, b.Kid}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("after concurrent starts the list holds %v, want %v once each", got, want)
	}

	// A restart publishes nothing new; a new secret adds its key at the end.
	before := read()
	if keys, err := bus.PublishAuditKey(t.Context(), js, n, a); err != nil || !slices.Equal(kids(keys), kids(before)) {
		t.Fatalf("republishing a known key: %v, %v; want %v", kids(keys), err, kids(before))
	}
	keys, err := bus.PublishAuditKey(t.Context(), js, n, c)
	if err != nil || !slices.Equal(kids(keys), append(kids(before), c.Kid)) || !slices.Equal(kids(read()), kids(keys)) {
		t.Fatalf("a new secret's key: %v, %v; want %v then %s", kids(keys), err, kids(before), c.Kid)
	}
	if got := read(); !got[0].Since.Equal(before[0].Since) {
		t.Errorf("the first key's since changed from %v to %v", before[0].Since, got[0].Since)
	}

	// Clients read the list and may not write it.
	_, anon := natstest.ConnectWith(t, wire.ConnConfig{URL: srv.ClientURL()})
	akv, err := anon.KeyValue(t.Context(), n.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := akv.Get(t.Context(), protocol.AuditKeysKey); err != nil {
		t.Fatalf("a client cannot read the audit keys: %v", err)
	}
	// A denied write gets no acknowledgement: bound the wait for it.
	denied, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := akv.Put(denied, protocol.AuditKeysKey, []byte(`[]`)); err == nil {
		t.Fatal("a client wrote the audit keys")
	}
	denied, cancel = context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := bus.PublishAuditKey(denied, anon, n, auditKey(4)); err == nil {
		t.Fatal("a client published an audit key")
	}
	if got := kids(read()); !slices.Equal(got, kids(keys)) {
		t.Fatalf("after a client's writes the list is %v, want %v", got, kids(keys))
	}

	// A value that is not a list is left alone, with an error saying so.
	if _, err := kv.Put(t.Context(), protocol.AuditKeysKey, []byte(`{"oops":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err = bus.PublishAuditKey(t.Context(), js, n, auditKey(5))
	if err == nil || !strings.Contains(err.Error(), "is not a list of audit keys") || !strings.Contains(err.Error(), "nats kv history interlock_config audit.keys") {
		t.Fatalf("publishing over junk: %v", err)
	}
	if e, _ := kv.Get(t.Context(), protocol.AuditKeysKey); string(e.Value()) != `{"oops":1}` {
		t.Fatalf("junk overwritten with %s", e.Value())
	}
}
