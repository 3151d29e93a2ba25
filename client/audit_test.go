package client_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
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
			natstest.Publish(t, js, names.Audit("booking", run), events.AuditType("refused"), run, rec)
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
	if ev, err = c.Resume(ctx, "booking", "r-v", events.Resume{ResumeToken: "wrong", Answers: map[string]json.RawMessage{"email": raw("a@b.c")}}); err != nil || ev.Kind != events.KindRefused {
		t.Fatalf("wrong token: %q, %v", ev.Kind, err)
	}
	if _, err := c.Resume(ctx, "booking", "r-v", events.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"email": raw("ann@example.com")}}); err != nil {
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
	if got := strings.Join(actions, " "); got != "started interrupted refused answered interrupted cancelled" {
		t.Fatalf("actions %s", got)
	}
	rep, err := c.VerifyAudit(ctx, "booking", "r-v")
	if err != nil || !rep.Intact || rep.Records != 5 || rep.Refusals != 1 || !rep.HeadCompared || rep.Head != *rep.Checkpoint || rep.FirstRecord != 1 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	if rep.Head.Hash != recs[len(recs)-1].Hash {
		t.Fatalf("head %s, last record %s", rep.Head.Hash, recs[len(recs)-1].Hash)
	}
}
