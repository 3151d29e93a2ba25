package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/protocol"
)

// checkWait bounds reading what the checks need: the servers serve again
// before the checks begin, but a cluster may still be electing leaders.
const checkWait = time.Minute

// tally is what the events stream holds of one run.
type tally struct {
	started, completed int
	// resumed counts resumed events by the checkpoint they name.
	resumed map[uint64]int
}

// result is what checkRun found of one run.
type result struct{ lost, dup, stuck, audit string }

func (r result) missing() bool { return strings.HasPrefix(r.lost, eventsMissingPrefix) }

// eventsMissingPrefix begins the finding of a run whose events are not
// all in the stream.
const eventsMissingPrefix = "events missing"

// check checks every run and fills rep's counts.
func (a *agents) check(ctx context.Context, cfg Config, rep *Report) error {
	tallies, err := a.readEvents(ctx)
	if err != nil {
		return err
	}
	c := a.c.WithWait(5 * time.Second)
	results := make([]result, cfg.Runs)
	errs := make([]error, cfg.Runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Agents {
		wg.Go(func() {
			for i := range next {
				r := &results[i]
				r.lost, r.dup, r.stuck, r.audit, errs[i] = a.checkRun(ctx, c, i, tallies[runID(i)])
			}
		})
	}
	for i := range cfg.Runs {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// A run whose last transition's worker was killed after it wrote the
	// checkpoint and before it published has its events published when
	// the command is delivered again, up to the ack wait later; one whose
	// publish failed (a stream without a leader while a node was paused or
	// killed) when the worker's backoff after that failure is over, up to
	// 30 s (bus.Worker): read the events again for such runs until then,
	// before calling them lost.
	deadline := time.Now().Add(max(3*cfg.AckWait, republishWait))
	for again := eventsMissing(results); len(again) > 0 && time.Now().Before(deadline); again = eventsMissing(results) {
		t := time.NewTimer(cfg.AckWait / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if tallies, err = a.readEvents(ctx); err != nil {
			return err
		}
		for _, i := range again {
			r := &results[i]
			if r.lost, r.dup, r.stuck, r.audit, err = a.checkRun(ctx, c, i, tallies[runID(i)]); err != nil {
				return err
			}
		}
	}
	waiting, err := a.stillPending(ctx, cfg)
	if err != nil {
		return err
	}
	for i, r := range results {
		problem := ""
		switch {
		case r.stuck != "":
			rep.Stuck++
			problem = r.stuck
		case r.lost != "":
			rep.Lost++
			problem = r.lost
		case r.dup != "":
			rep.Duplicated++
			problem = r.dup
		case r.audit != "":
			rep.AuditBroken++
			problem = r.audit
		case waiting[runID(i)]:
			// Ended, yet the index of what waits still lists it: an
			// inbox would show it waiting for ever.
			rep.PendingLeft++
			problem = "completed, but the pending index still lists it"
		default:
			rep.Completed++
		}
		if problem != "" && len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, runID(i)+": "+problem)
		}
	}
	return nil
}

// republishWait bounds how long the check waits for the events of a
// transition whose publish failed: the worker's longest backoff after a
// failure, and the attempt after it.
const republishWait = 45 * time.Second

// eventsMissing are the runs whose checkpoint ended well but whose events
// are not all in the stream yet.
func eventsMissing(results []result) []int {
	var out []int
	for i, r := range results {
		if r.missing() {
			out = append(out, i)
		}
	}
	return out
}

// checkRun checks run i against its tally of events. Each result says
// what is wrong of its kind, "" when nothing is.
func (a *agents) checkRun(ctx context.Context, c *client.Client, i int, t tally) (lost, dup, stuck, audit string, err error) {
	run := runID(i)
	cp, err := retry(ctx, func() (protocol.Checkpoint, error) { return c.Checkpoint(ctx, booking.Name, run) })
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "no checkpoint: the run was lost", "", "", "", nil
	case err != nil:
		return "", "", "", "", err
	case !cp.Finished():
		return "", "", fmt.Sprintf("still %s at %s (checkpoint %d)", cp.Status, cp.Node, cp.Checkpoint), "", nil
	case cp.Status != protocol.StatusCompleted:
		return fmt.Sprintf("ended %s at %s: %s", cp.Status, cp.Node, cp.Error), "", "", "", nil
	}
	_, want := answers(i)
	var got booking.State
	if err := json.Unmarshal(cp.State, &got); err != nil {
		return fmt.Sprintf("final state %s does not decode: %v", cp.State, err), "", "", "", nil
	}
	if !reflect.DeepEqual(got, want) {
		msg := fmt.Sprintf("final state %s, want %+v", cp.State, want)
		if len(got.Notes) > len(want.Notes) {
			return "", "an answer applied twice: " + msg, "", "", nil
		}
		return "an answer lost: " + msg, "", "", "", nil
	}
	var dups []string
	for rev, n := range t.resumed {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%d resumed events for checkpoint %d", n, rev))
		}
	}
	if t.started > 1 || t.completed > 1 {
		dups = append(dups, fmt.Sprintf("%d started and %d completed events", t.started, t.completed))
	}
	if len(dups) > 0 {
		return "", strings.Join(dups, "; "), "", "", nil
	}
	if t.started == 0 || t.completed == 0 || len(t.resumed) != len(want.Notes) {
		return fmt.Sprintf(eventsMissingPrefix+": %d started, %d resumed, %d completed; want 1, %d, 1", t.started, len(t.resumed), t.completed, len(want.Notes)), "", "", "", nil
	}
	ar, err := retry(ctx, func() (client.AuditReport, error) { return c.VerifyAudit(ctx, booking.Name, run) })
	if err != nil {
		return "", "", "", "", err
	}
	if !ar.Intact {
		var msgs []string
		for _, p := range ar.Problems {
			msgs = append(msgs, p.Message)
		}
		return "", "", "", "audit chain broken: " + strings.Join(msgs, "; "), nil
	}
	return "", "", "", "", nil
}

// retry calls f until it succeeds, fails with client.ErrNotFound, or
// checkWait has passed.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(checkWait)
	poll := firstPoll
	for {
		v, err := f()
		if err == nil || errors.Is(err, client.ErrNotFound) || time.Now().After(deadline) {
			return v, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, time.Second)
	}
}

// readEvents reads every booking event in the events stream and counts
// them by run, with batched direct gets, as a client may.
func (a *agents) readEvents(ctx context.Context) (map[string]tally, error) {
	return retry(ctx, func() (map[string]tally, error) {
		c := client.New(a.nc, a.js, a.names, "/soak", checkWait)
		out := map[string]tally{}
		q := client.WatchQuery{Flow: booking.Name}
		for {
			evs, more, err := c.Events(ctx, q, client.MaxPendingLimit)
			if err != nil {
				return nil, fmt.Errorf("soak: reading %s: %w", a.names.EventStream(), err)
			}
			for _, ev := range evs {
				if err := count(out, ev); err != nil {
					return nil, err
				}
				q.After = ev.Seq
			}
			if !more {
				return out, nil
			}
		}
	})
}

// count adds event m to its run's tally.
func count(out map[string]tally, m client.StreamEvent) error {
	// <prefix>.ev.<flow>.<run>.<kind>
	tok := strings.Split(m.Subject, ".")
	if len(tok) != 5 {
		return nil
	}
	run, kind := tok[3], tok[4]
	t := out[run]
	if t.resumed == nil {
		t.resumed = map[uint64]int{}
	}
	switch kind {
	case protocol.EventStarted:
		t.started++
	case protocol.EventCompleted:
		t.completed++
	case protocol.EventResumed:
		var r protocol.Resumed
		if err := json.Unmarshal(m.Event.Data(), &r); err != nil {
			return fmt.Errorf("soak: decoding %s: %w", m.Subject, err)
		}
		t.resumed[r.Checkpoint]++
	}
	out[run] = t
	return nil
}

// stillPending are the soak's runs the pending index lists once every run
// has ended: a page at a time, as an inbox reads it.
func (a *agents) stillPending(ctx context.Context, cfg Config) (map[string]bool, error) {
	out := map[string]bool{}
	q := client.PendingQuery{Flow: booking.Name, Limit: client.MaxPendingLimit}
	for {
		page, err := retry(ctx, func() (client.PendingPage, error) { return a.c.ListPending(ctx, q) })
		if err != nil {
			return nil, fmt.Errorf("soak: listing the pending index: %w", err)
		}
		for _, p := range page.Items {
			out[p.Run] = true
		}
		if page.Next == "" || len(out) > cfg.Runs {
			return out, nil
		}
		q.After = page.Next
	}
}
