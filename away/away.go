// Package away is people's absences: a person away names a delegate for
// a period (from, to, which of their roles), and meanwhile the delegate
// decides the person's assignments and claims and holds the roles they
// delegated, as the one authority says ([authority.Authority.Widen]).
//
// An absence is a run of the built-in flow [protocol.AbsenceFlow],
// started by the person: its audit chain records who delegated what to
// whom, for when, and how it ended. The run waits on one approval of
// [protocol.AbsenceAction] assigned to the person alone and due at the
// absence's end: approving it ends the absence early ([End]); its
// deadline ends it by itself. [Watch] follows the absences in force from
// the runs bucket: only a run its person started counts.
package away

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// MaxLength is the longest absence: a delegation does not outlive a
// quarter.
const MaxLength = 92 * 24 * time.Hour

// State is an absence's run state.
type State struct {
	Person   string    `json:"person"`
	Delegate string    `json:"delegate"`
	Roles    []string  `json:"roles,omitempty"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Ended is "early" once the person ended it.
	Ended string `json:"ended,omitempty"`
}

// Flow is the built-in flow of absences: one approval, assigned to the
// person, due at the absence's end.
func Flow() *engine.Flow {
	return engine.NewFlow[State](protocol.AbsenceFlow).
		Node("away", func(ctx context.Context, n *engine.Node[State]) error {
			s := n.State()
			if err := s.check(); err != nil {
				return err
			}
			roles := "every role they hold"
			if len(s.Roles) > 0 {
				roles = strings.Join(s.Roles, ", ")
			}
			_, err := n.Approve(ctx, engine.Approval{
				Action: protocol.AbsenceAction,
				Title:  fmt.Sprintf("%s is away until %s: %s decides for them", s.Person, s.To.UTC().Format("2 Jan 2006 15:04 UTC"), s.Delegate),
				Description: fmt.Sprintf("From %s to %s, %s decides what is assigned to or claimed by %s, and the approvals of %s. "+
					"Approve to end the absence now; it ends by itself at its end.", s.From.UTC().Format(time.RFC3339), s.To.UTC().Format(time.RFC3339), s.Delegate, s.Person, roles),
				Assignees: []string{s.Person},
				Args:      map[string]any{"delegate": s.Delegate, "roles": roles, "from": s.From.UTC().Format(time.RFC3339), "to": s.To.UTC().Format(time.RFC3339)},
				Decisions: []engine.Verdict{engine.VerdictApprove},
				Timeout:   max(time.Until(s.To), time.Second),
			})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"ended": "early"})
		}).
		Start("away").
		// Interlock keeps its own flows' runs compatible across releases.
		Migrate(engine.AnyVersion, engine.Migration{}).
		MustBuild()
}

// check refuses a state that is no absence, however the run was started:
// the checks of [Begin] hold for a start that did not pass through it.
func (s State) check() error {
	switch {
	case s.Person == "" || s.Delegate == "":
		return fmt.Errorf("%w: an absence names its person and a delegate", ErrInvalid)
	case s.Delegate == s.Person:
		return fmt.Errorf("%w: %s cannot be their own delegate", ErrInvalid, s.Person)
	case !s.To.After(s.From):
		return fmt.Errorf("%w: to (%s) is not after from (%s)", ErrInvalid, s.To.UTC().Format(time.RFC3339), s.From.UTC().Format(time.RFC3339))
	case s.To.Sub(s.From) > MaxLength:
		return fmt.Errorf("%w: an absence lasts at most %d days", ErrInvalid, int(MaxLength/(24*time.Hour)))
	}
	return nil
}

// Request is what a person asks: a delegate, which of their roles (none:
// every one), and when (From defaults to now).
type Request struct {
	Delegate string     `json:"delegate"`
	Roles    []string   `json:"roles,omitempty"`
	From     *time.Time `json:"from,omitempty"`
	To       time.Time  `json:"to"`
}

// Errors of [Begin] and [End].
var (
	// ErrInvalid: the request does not make an absence; its error says
	// why.
	ErrInvalid = errors.New("away: not an absence")
	// ErrInForce: the person has an absence in force already.
	ErrInForce = errors.New("away: an absence is in force already")
	// ErrNone: the person has no absence in force.
	ErrNone = errors.New("away: no absence in force")
)

// Begin checks req as person's (who holds roles, as dir says) and starts
// the absence with cl, which must send as person (vouched for them). It
// returns the absence started.
func Begin(ctx context.Context, cl *client.Client, set *Set, dir *people.Directory, person string, roles []string, req Request, now time.Time) (authority.Absence, error) {
	from := now
	if req.From != nil && req.From.After(now) {
		from = *req.From
	}
	ab := authority.Absence{Person: person, Delegate: strings.TrimSpace(req.Delegate), Roles: req.Roles, From: from, To: req.To}
	invalid := func(format string, args ...any) (authority.Absence, error) {
		return authority.Absence{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case dir == nil:
		return invalid("absences take a directory of people (serve --people): without one every caller is the local user")
	case ab.Delegate == "":
		return invalid("name a delegate: the person who decides for you meanwhile")
	case ab.Delegate == person:
		return invalid("you cannot be your own delegate")
	case !ab.To.After(now):
		return invalid("to (%s) is not in the future", ab.To.UTC().Format(time.RFC3339))
	case !ab.To.After(from):
		return invalid("to (%s) is not after from (%s)", ab.To.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	case ab.To.Sub(from) > MaxLength:
		return invalid("an absence lasts at most %d days; name a nearer end", int(MaxLength/(24*time.Hour)))
	}
	if _, ok := dir.Person(ab.Delegate); !ok {
		return invalid("%s is not a person of the directory", ab.Delegate)
	}
	for _, r := range ab.Roles {
		if !slices.Contains(roles, r) {
			return invalid("you do not hold role %s, so you cannot delegate it", r)
		}
	}
	if _, _, ok := set.Of(person, now); ok {
		return authority.Absence{}, ErrInForce
	}
	state := State{Person: person, Delegate: ab.Delegate, Roles: ab.Roles, From: ab.From, To: ab.To}
	b, err := json.Marshal(state)
	if err != nil {
		return authority.Absence{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return authority.Absence{}, err
	}
	ev, err := cl.Start(ctx, protocol.AbsenceFlow, RunOf(person, now), fields, nil)
	if err != nil {
		return authority.Absence{}, err
	}
	if ev.Kind == protocol.EventRefused {
		var ref protocol.Refused
		_ = ev.Decode(&ref)
		return authority.Absence{}, fmt.Errorf("away: Interlock refused the absence: %s", ref.Message)
	}
	set.await(ctx, person, now)
	return ab, nil
}

// End ends person's absence in force or to come at now, with cl sending
// as person (its approval is the person's own, approved), and returns it.
func End(ctx context.Context, cl *client.Client, set *Set, person string, now time.Time) (authority.Absence, error) {
	ab, run, ok := set.Coming(person, now)
	if !ok {
		return authority.Absence{}, ErrNone
	}
	in, err := cl.LastInterrupt(ctx, protocol.AbsenceFlow, run)
	if err != nil {
		return authority.Absence{}, fmt.Errorf("away: reading the absence %s: %w", run, err)
	}
	ev, err := cl.Resume(ctx, protocol.AbsenceFlow, run, protocol.Resume{RequestID: in.RequestID, Decision: string(protocol.VerdictApprove), Reason: "ended early"})
	if err != nil {
		return authority.Absence{}, err
	}
	if ev.Kind == protocol.EventRefused {
		var ref protocol.Refused
		_ = ev.Decode(&ref)
		return authority.Absence{}, fmt.Errorf("away: Interlock refused to end the absence: %s", ref.Message)
	}
	set.forget(run)
	return ab, nil
}

// RunOf is the run of an absence person starts at now.
func RunOf(person string, now time.Time) string {
	h := sha256.Sum256([]byte(strings.ToLower(person)))
	return "away-" + hex.EncodeToString(h[:8]) + "-" + strconv.FormatInt(now.UnixNano(), 36)
}

// Set is the absences of the deployment that wait: started by their
// person, not ended. It follows the runs bucket; Stop ends that.
type Set struct {
	log  zerolog.Logger
	w    jetstream.KeyWatcher
	done chan struct{}

	mu      sync.Mutex
	runs    map[string]authority.Absence // by run
	changed chan struct{}
}

// Watch follows the absences in the runs bucket of names, and returns
// once those there now are read.
func Watch(ctx context.Context, js jetstream.JetStream, names wire.Names, log zerolog.Logger) (*Set, error) {
	kv, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("away: binding bucket %s: %w", names.RunsBucket(), err)
	}
	w, err := kv.Watch(context.WithoutCancel(ctx), protocol.AbsenceFlow+".>")
	if err != nil {
		return nil, fmt.Errorf("away: watching the absences in %s: %w", names.RunsBucket(), err)
	}
	s := &Set{log: log, w: w, done: make(chan struct{}), runs: map[string]authority.Absence{}, changed: make(chan struct{})}
	ready := make(chan struct{})
	go s.follow(ready)
	select {
	case <-ready:
		return s, nil
	case <-ctx.Done():
		_ = w.Stop()
		<-s.done
		return nil, fmt.Errorf("away: reading the absences: %w", ctx.Err())
	}
}

// follow applies every change of an absence's run until the watch ends.
func (s *Set) follow(ready chan struct{}) {
	defer close(s.done)
	once := sync.OnceFunc(func() { close(ready) })
	defer once()
	for e := range s.w.Updates() {
		if e == nil {
			once()
			continue
		}
		run := strings.TrimPrefix(e.Key(), protocol.AbsenceFlow+".")
		ab, ok := absenceOf(e)
		s.mu.Lock()
		if ok {
			s.runs[run] = ab
		} else {
			delete(s.runs, run)
		}
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// absenceOf is the absence an entry of the runs bucket holds: a run that
// waits, started by its person.
func absenceOf(e jetstream.KeyValueEntry) (authority.Absence, bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return authority.Absence{}, false
	}
	var cp protocol.Checkpoint
	if json.Unmarshal(e.Value(), &cp) != nil || cp.Status != protocol.StatusWaiting {
		return authority.Absence{}, false
	}
	var st State
	if json.Unmarshal(cp.State, &st) != nil || st.Person == "" || st.Person != cp.StartedBy || st.Delegate == "" || !st.To.After(st.From) {
		return authority.Absence{}, false
	}
	return authority.Absence{Person: st.Person, Delegate: st.Delegate, Roles: st.Roles, From: st.From, To: st.To}, true
}

// Absences are the absences that wait (in force now or to come).
func (s *Set) Absences() []authority.Absence {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]authority.Absence, 0, len(s.runs))
	for _, ab := range s.runs {
		out = append(out, ab)
	}
	slices.SortFunc(out, func(a, b authority.Absence) int {
		return cmp.Or(a.From.Compare(b.From), strings.Compare(a.Person, b.Person))
	})
	return out
}

// Of is person's absence in force at now, and its run.
func (s *Set) Of(person string, now time.Time) (authority.Absence, string, bool) {
	return s.find(func(ab authority.Absence) bool { return ab.Person == person && ab.Active(now) })
}

// Coming is person's absence still to come at now, and its run.
func (s *Set) Coming(person string, now time.Time) (authority.Absence, string, bool) {
	return s.find(func(ab authority.Absence) bool { return ab.Person == person && now.Before(ab.To) })
}

// For are the absences in force at now whose delegate is delegate.
func (s *Set) For(delegate string, now time.Time) []authority.Absence {
	var out []authority.Absence
	for _, ab := range s.Absences() {
		if ab.Delegate == delegate && ab.Active(now) {
			out = append(out, ab)
		}
	}
	return out
}

func (s *Set) find(match func(authority.Absence) bool) (authority.Absence, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, run := range slices.Sorted(func(yield func(string) bool) {
		for r := range s.runs {
			if !yield(r) {
				return
			}
		}
	}) {
		if ab := s.runs[run]; match(ab) {
			return ab, run, true
		}
	}
	return authority.Absence{}, "", false
}

// await waits, briefly, until the watch has seen person's absence that
// Begin started, so that what follows (a page, a decision) sees it.
func (s *Set) await(ctx context.Context, person string, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if _, _, ok := s.Coming(person, now); ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// forget drops run at once, ahead of the watch, once its person ended it.
func (s *Set) forget(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, run)
}

// Start does nothing: Watch started the set. It makes a Set an
// interlock.Background, stopped with the service.
func (s *Set) Start(context.Context) error { return nil }

// Stop stops following the bucket.
func (s *Set) Stop(ctx context.Context) error {
	_ = s.w.Stop()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
