package client_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// TestAuditReadsAWholeSubjectInOrder reads a run's audit subject holding
// more records than one batch, interleaved with another run's, and checks
// that every record comes back once, in stream order, and no other run's.
func TestAuditReadsAWholeSubjectInOrder(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, booking.Flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	c := client.New(nc, js, wire.Names{}, "/test", 0)
	names := wire.Names{Prefix: wire.DefaultPrefix}

	const n = 600
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		for _, run := range []string{"r-many", "r-other"} {
			rec := map[string]any{"flow": "booking", "run": run, "action": "refused", "at": at, "code": "invalid_answer", "reason": strconv.Itoa(i), "side": true}
			natstest.Publish(t, js, names.Audit("booking", run), protocol.AuditType("refused"), run, rec)
		}
	}
	recs, err := c.Audit(t.Context(), "booking", "r-many")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("read %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Reason != strconv.Itoa(i+1) || r.Run != "r-many" || r.EventType != "io.interlock.audit.refused" ||
			(i > 0 && r.StreamSeq <= recs[i-1].StreamSeq) || !strings.Contains(string(r.Data), `"reason":"`+r.Reason+`"`) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	// No records and no checkpoint: no such run.
	if _, err := c.Audit(t.Context(), "booking", "r-none"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Audit of an unknown run: %v, want ErrNotFound", err)
	}
	if _, err := c.VerifyAudit(t.Context(), "booking", "r-none"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("VerifyAudit of an unknown run: %v, want ErrNotFound", err)
	}
	// Records without a checkpoint are read, and verify says what it
	// could not compare. These records carry no hash: they break the chain.
	rep, err := c.VerifyAudit(t.Context(), "booking", "r-many")
	if err != nil || rep.Intact || rep.Refusals != n || rep.HeadCompared || !strings.Contains(strings.Join(rep.Notes, " "), "the head could not be compared") {
		t.Fatalf("VerifyAudit without a checkpoint: %+v, %v", rep, err)
	}
	if _, err := c.Audit(t.Context(), "book.ing", "r-many"); err == nil || !strings.Contains(err.Error(), `flow name "book.ing"`) {
		t.Fatalf("Audit of a bad flow name: %v", err)
	}
}

// TestVerifyAuditOfARunOverTheBus checks a booking run's chain as the
// service writes it, refusals included.
func TestVerifyAuditOfARunOverTheBus(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	ctx := t.Context()
	ev, err := c.Start(ctx, "booking", "r-v", map[string]json.RawMessage{"name": raw("Ann")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := interrupted(t, ev)
	if ev, err = c.Resume(ctx, "booking", "r-v", protocol.Resume{ResumeToken: "wrong", Answers: map[string]json.RawMessage{"email": raw("a@b.c")}}); err != nil || ev.Kind != protocol.EventRefused {
		t.Fatalf("wrong token: %q, %v", ev.Kind, err)
	}
	if _, err := c.Resume(ctx, "booking", "r-v", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "booking", "r-v", "done"); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Audit(ctx, "booking", "r-v")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
	}
	if got := strings.Join(actions, " "); got != "started refused answered cancelled" {
		t.Fatalf("actions %s", got)
	}
	rep, err := c.VerifyAudit(ctx, "booking", "r-v")
	if err != nil || !rep.Intact || rep.Records != 3 || rep.Refusals != 1 || !rep.HeadCompared || rep.Head != *rep.Checkpoint || rep.FirstRecord != 1 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	key, err := engine.AuditKeyOf(natstest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Messages != 4 || rep.Vouched != 4 || rep.Unvouched != nil || !slices.Equal(rep.SignedBy, []string{key.ID}) ||
		rep.KeysPinned || len(rep.Keys) != 1 || rep.Keys[0].PublicKey != key.String() {
		t.Fatalf("VerifyAudit vouches for %d of %d messages, signed by %v, with keys %+v; want all, by %s", rep.Vouched, rep.Messages, rep.SignedBy, rep.Keys, key.ID)
	}
	keys, err := c.AuditKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Kid != key.ID {
		t.Fatalf("AuditKeys = %+v, %v; want %s", keys, err, key.ID)
	}
	if rep.Head.Hash != recs[len(recs)-1].Hash {
		t.Fatalf("head %s, last record %s", rep.Head.Hash, recs[len(recs)-1].Hash)
	}
}

// forgedClient starts a booking service and returns a client and a
// JetStream connection with the workers' rights, as a writer that got
// into the audit stream has.
func forgedClient(t *testing.T) (*client.Client, jetstream.JetStream) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, booking.Flow())
	_, workers := natstest.Connect(t, srv.ClientURL())
	nc, js := natstest.ConnectWith(t, wire.ConnConfig{URL: srv.ClientURL()})
	return client.New(nc, js, wire.Names{}, "/auditor", 0), workers
}

// forge publishes rec on a run's audit subject, as the event type of its
// action, with its hash computed as Interlock computes it when hash is
// set, and signed with key when key is set.
func forge(t *testing.T, js jetstream.JetStream, run string, rec map[string]any, hash bool, key ed25519.PrivateKey) uint64 {
	t.Helper()
	if key != nil {
		rec["kid"] = protocol.AuditKeyID(key.Public().(ed25519.PublicKey))
	}
	if hash || key != nil {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if rec["hash"], err = protocol.CanonicalHash(b); err != nil {
			t.Fatal(err)
		}
	}
	if key != nil {
		digest, _ := hex.DecodeString(rec["hash"].(string))
		rec["sig"] = base64.StdEncoding.EncodeToString(ed25519.Sign(key, digest))
	}
	action, _ := rec["action"].(string)
	natstest.Publish(t, js, wire.Names{Prefix: wire.DefaultPrefix}.Audit("booking", run), protocol.AuditType(action), run, rec)
	info, err := js.Stream(t.Context(), wire.Names{Prefix: wire.DefaultPrefix}.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	return info.CachedInfo().State.LastSeq
}

// unvouched returns what the report says of the message at streamSeq:
// the checks it failed, or nil when it is vouched for.
func unvouched(rep client.AuditReport, streamSeq uint64) []string {
	for _, u := range rep.Unvouched {
		if u.StreamSeq == streamSeq {
			return u.Checks
		}
	}
	return nil
}

// TestVerifyAuditReportsRecordsForgedOnTheStream publishes, with the
// workers' rights, the records a security review forged: a side record
// of an approval by the CEO naming a run's head, the same with its hash
// computed, and one-record chains for a run that never existed, unsigned
// and signed with a key of the forger's. The verifier reports each as
// not vouched for, and why, and vouches for the run's own records.
func TestVerifyAuditReportsRecordsForgedOnTheStream(t *testing.T) {
	t.Parallel()
	c, workers := forgedClient(t)
	ctx := t.Context()
	if _, err := c.Start(ctx, "booking", "r-f", map[string]json.RawMessage{"name": raw("Ann")}, nil); err != nil {
		t.Fatal(err)
	}
	before, err := c.VerifyAudit(ctx, "booking", "r-f")
	if err != nil || !before.Intact {
		t.Fatalf("before the forgeries: %+v, %v", before, err)
	}
	head := before.Head.Hash

	// As the review wrote it, and as a careful forger would.
	bare := forge(t, workers, "r-f", map[string]any{"action": "approved", "by": "ceo@example.com", "side": true, "prev": head}, false, nil)
	careful := forge(t, workers, "r-f", map[string]any{"flow": "booking", "run": "r-f", "action": "approved", "at": time.Now().UTC(),
		"by": "ceo@example.com", "side": true, "prev": head}, true, nil)
	rep, err := c.VerifyAudit(ctx, "booking", "r-f")
	if err != nil || rep.Intact {
		t.Fatalf("after the forgeries: intact %v, %v", rep.Intact, err)
	}
	for _, tc := range []struct {
		seq  uint64
		want []string
	}{
		{bare, []string{client.CheckRecord, client.CheckMalformed, client.CheckHash, client.CheckUnsigned, client.CheckSide}},
		{careful, []string{client.CheckUnsigned, client.CheckSide}},
	} {
		if got := unvouched(rep, tc.seq); !slices.Equal(got, tc.want) {
			t.Errorf("forged side record at stream seq %d: checks %v, want %v\n%+v", tc.seq, got, tc.want, rep.Problems)
		}
	}
	if rep.Vouched != rep.Messages-2 || rep.Records != before.Records || rep.Refusals != 0 || rep.Head != before.Head {
		t.Fatalf("the run's own records: %d of %d vouched for, %d records, %d refusals, head %+v", rep.Vouched, rep.Messages, rep.Records, rep.Refusals, rep.Head)
	}
	trail, err := c.AuditTrail(ctx, "booking", "r-f")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range trail.Entries {
		forged := e.StreamSeq == bare || e.StreamSeq == careful
		if e.Vouched == forged || forged && e.Record.Action != "approved" {
			t.Errorf("stream seq %d (%s): vouched %v, checks %v", e.StreamSeq, e.Record.Action, e.Vouched, e.Checks)
		}
	}

	// A run that never existed, one record.
	_, other, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ghost := func(run string) map[string]any {
		return map[string]any{"flow": "booking", "run": run, "action": "approved", "at": time.Now().UTC(), "by": "ceo@example.com",
			"node": "ask_email", "kind": "approval", "seq": 1, "outcome": map[string]any{"status": "completed"}}
	}
	for _, tc := range []struct {
		run  string
		key  ed25519.PrivateKey
		want []string
	}{
		{"r-ghost", nil, []string{client.CheckUnsigned}},
		{"r-ghost-signed", other, []string{client.CheckKey}},
	} {
		seq := forge(t, workers, tc.run, ghost(tc.run), true, tc.key)
		rep, err := c.VerifyAudit(ctx, "booking", tc.run)
		if err != nil || rep.Intact || rep.HeadCompared || rep.Vouched != 0 || !slices.Equal(unvouched(rep, seq), tc.want) {
			t.Errorf("%s: intact %v, %d vouched for, checks %v, want %v: %v\n%+v", tc.run, rep.Intact, rep.Vouched, unvouched(rep, seq), tc.want, err, rep.Problems)
		}
	}

	// Pinned keys: the deployment's vouches for its records; another
	// vouches for none.
	key, err := engine.AuditKeyOf(natstest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := protocol.ParseAuditKey(key.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := c.VerifyAudit(ctx, "booking", "r-f", pinned); err != nil || !rep.KeysPinned || rep.Vouched != rep.Messages-2 {
		t.Errorf("pinned deployment key: %d of %d vouched for, pinned %v: %v", rep.Vouched, rep.Messages, rep.KeysPinned, err)
	}
	wrong, _ := protocol.ParseAuditKey(base64.StdEncoding.EncodeToString(other.Public().(ed25519.PublicKey)))
	rep, err = c.VerifyAudit(ctx, "booking", "r-f", wrong)
	if err != nil || rep.Vouched != 0 || len(rep.Unvouched) != rep.Messages {
		t.Fatalf("pinned other key: %d of %d vouched for: %v", rep.Vouched, rep.Messages, err)
	}
	for _, u := range rep.Unvouched {
		if u.StreamSeq != bare && u.StreamSeq != careful && !slices.Equal(u.Checks, []string{client.CheckKey}) {
			t.Errorf("pinned other key: the run's record at stream seq %d fails %v, want only %s", u.StreamSeq, u.Checks, client.CheckKey)
		}
	}
}

// TestAuditSinceReadsTheRecordsOfEveryRunFromATimeOn: the records stored
// since a time, of every run, in order, bounded by a limit that says when
// more were stored.
func TestAuditSinceReadsTheRecordsOfEveryRunFromATimeOn(t *testing.T) {
	t.Parallel()
	c := newClient(t, 0)
	start := func(run string) {
		t.Helper()
		if _, err := c.Start(t.Context(), "booking", run, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	start("r-before")
	natstest.Eventually(t, "r-before's record", func() bool { recs, _ := c.Audit(t.Context(), "booking", "r-before"); return len(recs) > 0 })
	since := time.Now()
	start("r-1")
	start("r-2")
	var recs []protocol.AuditRecord
	natstest.Eventually(t, "the records since", func() bool {
		var err error
		recs, _, err = c.AuditSince(t.Context(), since, 100)
		return err == nil && len(recs) >= 2
	})
	var runs []string
	for _, r := range recs {
		runs = append(runs, r.Run)
	}
	if len(recs) != 2 || runs[0] != "r-1" || runs[1] != "r-2" {
		t.Errorf("records since: %v, want r-1's then r-2's, not r-before's", runs)
	}
	one, more, err := c.AuditSince(t.Context(), since, 1)
	if err != nil || len(one) != 1 || !more {
		t.Errorf("AuditSince with a limit of 1 = %d records, more %v, %v; want one and more", len(one), more, err)
	}
	if _, _, err := c.AuditSince(t.Context(), since, 0); err == nil {
		t.Error("AuditSince took a limit of 0")
	}
}
