package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// checkWait bounds reading what the checks need: the servers serve again
// before the checks begin, but a cluster may still be electing leaders.
const checkWait = time.Minute

// tally is what the events stream holds of one run.
type tally struct {
	started, completed, expired, cancelled, answered, reminded, consumed int
	// resumed counts resumed events by the checkpoint they name;
	// remindedAt the reminded events likewise (a run waiting long enough
	// gets each of its reminders, a transition each); interrupted the
	// interrupted events by request.
	resumed     map[uint64]int
	remindedAt  map[uint64]int
	interrupted map[string]int
	// refused is the code of each refusal of the run's commands, by the
	// refused command's event id.
	refused map[string]protocol.Code
}

// duplicates says which events of one transition the stream holds twice,
// "" if none.
func (t tally) duplicates() string {
	var dups []string
	for rev, n := range t.resumed {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%d resumed events for checkpoint %d", n, rev))
		}
	}
	for rev, n := range t.remindedAt {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%d reminded events for checkpoint %d", n, rev))
		}
	}
	for req, n := range t.interrupted {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%d interrupted events for request %s", n, req))
		}
	}
	if t.started > 1 || t.completed > 1 || t.expired > 1 || t.cancelled > 1 || t.answered > 1 {
		dups = append(dups, fmt.Sprintf("%d started, %d completed, %d expired, %d cancelled and %d answered events", t.started, t.completed, t.expired, t.cancelled, t.answered))
	}
	slices.Sort(dups)
	return strings.Join(dups, "; ")
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
				r.lost, r.dup, r.stuck, r.audit, errs[i] = a.checkRun(ctx, cfg, c, i, tallies[a.runOf(i)])
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
			if r.lost, r.dup, r.stuck, r.audit, err = a.checkRun(ctx, cfg, c, i, tallies[a.runOf(i)]); err != nil {
				return err
			}
		}
	}
	waiting, err := a.stillPending(ctx, cfg)
	if err != nil {
		return err
	}
	left, stale, err := a.sortPending(ctx, waiting, func(run string) string {
		if strings.HasPrefix(run, "mcp-") {
			return protocol.GateFlow // a gateway run's gate run
		}
		var i int
		_, _ = fmt.Sscanf(run, "soak-%d", &i)
		return flowOf(cfg, i)
	})
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
		case waiting[a.runOf(i)]:
			// Ended, yet the index of what waits still lists it: an
			// inbox would show it waiting for ever. Unless the bucket's
			// leader has no such entry: then a replica answering direct
			// gets serves what it had.
			switch {
			case left[a.runOf(i)]:
				rep.PendingLeft++
				a.pendingLeft = append(a.pendingLeft, flowOf(cfg, i)+"."+a.runOf(i))
				problem = "completed, but the pending index still lists it"
			case stale[a.runOf(i)]:
				rep.StaleReplica++
				problem = "ended; the pending bucket's leader no longer lists it, yet a replica's direct gets still do (30 s after every run ended): a replica serves stale data"
			default:
				rep.Completed++ // a replica lagged, and caught up
			}
		default:
			rep.Completed++
		}
		if problem != "" && len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, runID(i)+": "+problem)
		}
	}
	return nil
}

// sweptByRestart restarts the worker process, whose start sweeps the
// pending index of the entries of runs that no longer wait, and returns
// how many of the entries the check found left (a.pendingLeft) the
// bucket's leader no longer has within sweepWait.
func (a *agents) sweptByRestart(ctx context.Context, worker *proc) (int, error) {
	if err := worker.kill(); err != nil {
		return 0, err
	}
	if err := worker.start(ctx); err != nil {
		return 0, err
	}
	gone := map[string]bool{}
	for deadline := time.Now().Add(sweepWait); len(gone) < len(a.pendingLeft) && time.Now().Before(deadline); {
		for _, key := range a.pendingLeft {
			if gone[key] {
				continue
			}
			_, _, err := wire.LeaderKV(ctx, a.nc, a.names.PendingBucket(), key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				gone[key] = true
			case err != nil && ctx.Err() != nil:
				return len(gone), ctx.Err()
			}
		}
		if len(gone) < len(a.pendingLeft) && wait(ctx, time.Second) != nil {
			return len(gone), ctx.Err()
		}
	}
	return len(gone), nil
}

// sweepWait bounds how long the soak waits for a restarted worker's
// sweep to remove the entries of runs left listed.
const sweepWait = time.Minute

// staleWait bounds how long a replica's direct gets may lag behind the
// leader once every run has ended, before the check calls it stale.
const staleWait = 30 * time.Second

// sortPending sorts the runs the pending index listed (by direct get)
// into those the pending bucket's leader lists too (left: Interlock's
// doing) and those it has removed, yet a replica's direct gets still list
// staleWait later (stale: the replica's). Runs whose direct gets catch up
// meanwhile are neither.
func (a *agents) sortPending(ctx context.Context, listed map[string]bool, flowOf func(run string) string) (left, stale map[string]bool, err error) {
	left, stale = map[string]bool{}, map[string]bool{}
	for run := range listed {
		key := flowOf(run) + "." + run
		_, err := retry(ctx, func() (struct{}, error) {
			_, _, err := wire.LeaderKV(ctx, a.nc, a.names.PendingBucket(), key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				err = client.ErrNotFound // retry's end
			}
			return struct{}{}, err
		})
		switch {
		case err == nil:
			left[run] = true
		case errors.Is(err, client.ErrNotFound):
			stale[run] = true
		default:
			return nil, nil, fmt.Errorf("soak: reading %s of %s from its leader: %w", key, a.names.PendingBucket(), err)
		}
	}
	if len(stale) == 0 {
		return left, stale, nil
	}
	pending, err := a.js.KeyValue(ctx, a.names.PendingBucket())
	if err != nil {
		return nil, nil, fmt.Errorf("soak: binding %s: %w", a.names.PendingBucket(), err)
	}
	for deadline := time.Now().Add(staleWait); len(stale) > 0 && time.Now().Before(deadline); {
		for run := range stale {
			// A KV get is a direct get, which any replica may answer.
			if _, err := pending.Get(ctx, flowOf(run)+"."+run); errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
				delete(stale, run) // caught up: no problem at all
			}
		}
		if wait(ctx, time.Second) != nil {
			return nil, nil, ctx.Err()
		}
	}
	return left, stale, nil
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
func (a *agents) checkRun(ctx context.Context, cfg Config, c *client.Client, i int, t tally) (lost, dup, stuck, audit string, err error) {
	run, flow := a.runOf(i), flowOf(cfg, i)
	cp, err := retry(ctx, func() (protocol.Checkpoint, error) { return c.Checkpoint(ctx, flow, run) })
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "no checkpoint: the run was lost", "", "", "", nil
	case err != nil:
		return "", "", "", "", err
	case !cp.Finished():
		return "", "", fmt.Sprintf("still %s at %s (checkpoint %d)", cp.Status, cp.Node, cp.Checkpoint), "", nil
	case flow == refund.Name:
		if lost, dup = a.checkRefund(i, cp, t); lost != "" || dup != "" {
			return lost, dup, "", "", nil
		}
		return a.checkAudit(ctx, c, flow, run)
	case flow == protocol.AskFlow:
		if lost, dup = a.checkAsk(i, cp, t); lost != "" || dup != "" {
			return lost, dup, "", "", nil
		}
		return a.checkAudit(ctx, c, flow, run)
	case flow == protocol.GateFlow:
		check := a.checkGate
		if isGateway(cfg, i) {
			check = a.checkGateway
		}
		if lost, dup = check(i, cp, t); lost != "" || dup != "" {
			return lost, dup, "", "", nil
		}
		return a.checkAudit(ctx, c, flow, run)
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
	if d := t.duplicates(); d != "" {
		return "", d, "", "", nil
	}
	if t.started == 0 || t.completed == 0 || len(t.resumed) != len(want.Notes) {
		return fmt.Sprintf(eventsMissingPrefix+": %d started, %d resumed, %d completed; want 1, %d, 1", t.started, len(t.resumed), t.completed, len(want.Notes)), "", "", "", nil
	}
	return a.checkAudit(ctx, c, flow, run)
}

// checkAudit verifies run's audit chain.
func (a *agents) checkAudit(ctx context.Context, c *client.Client, flow, run string) (lost, dup, stuck, audit string, err error) {
	ar, err := retry(ctx, func() (client.AuditReport, error) { return c.VerifyAudit(ctx, flow, run) })
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
		for _, flow := range []string{booking.Name, refund.Name, protocol.AskFlow, protocol.GateFlow} {
			q := client.WatchQuery{Flow: flow}
			for more := true; more; {
				var evs []client.StreamEvent
				var err error
				if evs, more, err = c.Events(ctx, q, client.MaxPendingLimit); err != nil {
					return nil, fmt.Errorf("soak: reading %s: %w", a.names.EventStream(), err)
				}
				for _, ev := range evs {
					if err := count(out, ev); err != nil {
						return nil, err
					}
					q.After = ev.Seq
				}
			}
		}
		return out, nil
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
		t.resumed, t.remindedAt, t.interrupted, t.refused = map[uint64]int{}, map[uint64]int{}, map[string]int{}, map[string]protocol.Code{}
	}
	switch kind {
	case protocol.EventStarted:
		t.started++
	case protocol.EventCompleted:
		t.completed++
	case protocol.EventExpired:
		t.expired++
	case protocol.EventCancelled:
		t.cancelled++
	case protocol.EventAnswered:
		t.answered++
	case protocol.EventReminded:
		t.reminded++
		var ev struct {
			Checkpoint uint64 `json:"checkpoint"`
		}
		if err := json.Unmarshal(m.Event.Data(), &ev); err != nil {
			return fmt.Errorf("soak: decoding %s: %w", m.Subject, err)
		}
		t.remindedAt[ev.Checkpoint]++
	case protocol.EventConsumed:
		t.consumed++
	case protocol.EventInterrupted:
		var in protocol.Interrupted
		if err := json.Unmarshal(m.Event.Data(), &in); err != nil {
			return fmt.Errorf("soak: decoding %s: %w", m.Subject, err)
		}
		t.interrupted[in.RequestID]++
	case protocol.EventRefused:
		var r protocol.Refused
		if err := json.Unmarshal(m.Event.Data(), &r); err != nil {
			return fmt.Errorf("soak: decoding %s: %w", m.Subject, err)
		}
		t.refused[r.EventID] = r.Code
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
	for _, flow := range []string{booking.Name, refund.Name, protocol.AskFlow, protocol.GateFlow} {
		q := client.PendingQuery{Flow: flow, Limit: client.MaxPendingLimit}
		for {
			page, err := retry(ctx, func() (client.PendingPage, error) { return a.c.ListPending(ctx, q) })
			if err != nil {
				return nil, fmt.Errorf("soak: listing the pending index: %w", err)
			}
			for _, p := range page.Items {
				out[p.Run] = true
			}
			if page.Next == "" || len(out) > cfg.Runs {
				break
			}
			q.After = page.Next
		}
	}
	return out, nil
}

// histories are the histories of the runs rep.Problems and rep.Unrun
// name: what their agents were told of each command they sent (told),
// then the run's events as the stream holds them and its checkpoint at
// the end.
func (a *agents) histories(ctx context.Context, cfg Config, told *agents, rep *Report) {
	runs := slices.Clone(rep.Unrun)
	for _, p := range rep.Problems {
		run, _, _ := strings.Cut(p, ":")
		runs = append(runs, run)
	}
	for _, run := range runs {
		var i int
		if _, err := fmt.Sscanf(run, "soak-%d", &i); err != nil {
			continue
		}
		if rep.Histories == nil {
			rep.Histories = map[string][]string{}
		}
		rep.Histories[run] = append(told.told(run), a.history(ctx, flowOf(cfg, i), a.runOf(i))...)
	}
}

// told is what the agents were told of run's commands.
func (a *agents) told(run string) []string {
	a.histMu.Lock()
	defer a.histMu.Unlock()
	return slices.Clone(a.hist[run])
}

// history is run's events and checkpoint, a line each, without resume
// tokens or states.
func (a *agents) history(ctx context.Context, flow, run string) []string {
	var out []string
	q := client.WatchQuery{Flow: flow, Run: run}
	for more := true; more && len(out) < maxHistory; {
		evs, m, err := a.c.Events(ctx, q, 100)
		if err != nil {
			return append(out, "events not read: "+err.Error())
		}
		more = m
		for _, ev := range evs {
			var data map[string]any
			_ = json.Unmarshal(ev.Event.Data(), &data)
			for _, secret := range []string{"resumeToken", "state", "questions", "description", "argsSchema"} {
				delete(data, secret)
			}
			b, _ := json.Marshal(data)
			if len(b) > 240 {
				b = append(b[:240], "..."...)
			}
			cause := ""
			if c := events.StringExtension(ev.Event, protocol.ExtCausation); c != "" {
				cause = " of " + c
			}
			out = append(out, fmt.Sprintf("%s event #%d %s%s %s", ev.Event.Time().UTC().Format("15:04:05.000"), ev.Seq, ev.Kind, cause, b))
			q.After = ev.Seq
		}
	}
	cp, err := a.c.Checkpoint(ctx, flow, run)
	if err != nil {
		return append(out, "checkpoint not read: "+err.Error())
	}
	return append(out, fmt.Sprintf("checkpoint %d: %s at %s, applied %v, decisions %+v", cp.Checkpoint, cp.Status, cp.Node, cp.Applied, cp.Decisions))
}
