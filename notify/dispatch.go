package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/away"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Channel is a way of reaching people (e-mail, Web Push): it renders one
// notice and sends it to one address. Everything else is the
// [Dispatcher]'s: following the events, skipping work settled meanwhile,
// finding the recipients and their addresses, minting their links,
// recording what was sent, retrying and dead-lettering.
type Channel interface {
	// Name is the channel's name (mail, webpush): its consumer is
	// <prefix>-<name>, its delivery records start with it, and a person's
	// or a role's address on it is the directory's addresses.<name>.
	Name() string
	// Post sends n to n.Address, and returns a note kept with the record
	// of the delivery (a message id). An error wrapped by [Permanent]
	// means the address refuses it for good: the other recipients still
	// get theirs, the address is not tried again, and the event is then
	// dead-lettered naming it. An error wrapped by [RetryAfter] says when
	// the receiver takes the next attempt. Any other error has the event
	// tried again (each address that has its notice is skipped).
	Post(ctx context.Context, n Notice) (string, error)
}

// Addresser is implemented by a channel whose addresses are not the
// directory's (Web Push: the devices a person subscribed; Slack: the
// thread a run came from): it returns where the channel reaches a person
// or a role with interrupt in, none when nowhere.
type Addresser interface {
	Addresses(ctx context.Context, to Recipient, in protocol.Interrupted) ([]string, error)
}

// Settler is implemented by a channel that follows up what it sent once
// the run's request is settled (Web Push replaces the notification, so
// that no phone offers to approve what was decided elsewhere): the
// dispatcher then also follows the resumed, expired and cancelled events,
// and calls Settle once for each address it brought the run's requests
// to. Settle's errors are as Post's.
type Settler interface {
	Settle(ctx context.Context, s Settled) (string, error)
}

// Settled is a run's request settled, told to one address that had a
// notice of it.
type Settled struct {
	Recipient
	Address string
	// Flow, Run and RequestID name the request; Heading is what it asked
	// (its title); Kind is the event that settled it (resumed, expired,
	// cancelled, or interrupted when a newer request of the run took its
	// place).
	Flow, Run, RequestID, Heading, Kind string
	// What says in a few words how: "Approved by ann", "Expired",
	// "Cancelled by sam", "Moved on: now for legal".
	What string
	// Detail is a line more, when there is one: the reason given
	// ("Reason: a duplicate") or the answer ("Answer: ...").
	Detail string
	// To is who the request now waits on (its roles, or its assignees),
	// when a newer request took its place (Kind interrupted).
	To string
	// At is the settling event's time, and Data its data (a Resumed, an
	// Expired, a Cancelled; an Interrupted), for a channel that says more
	// than What; both are zero when the run was found finished as the
	// notice went out.
	At   time.Time
	Data json.RawMessage
	// Link is the run's page in the inbox.
	Link string
	// EventID is the settling event's id; Key the follow-up's record.
	EventID, Key string
}

// Why says why a notice is sent.
type Why string

// Reasons of a notice.
const (
	// WhyAsked: an interrupt waits on the recipient.
	WhyAsked Why = "asked"
	// WhyVote: a quorum's approval waits on one more vote.
	WhyVote Why = "vote"
	// WhyReminder: a reminder of an interrupt still waiting.
	WhyReminder Why = "reminder"
	// WhyDelegated: an interrupt was delegated to the recipient.
	WhyDelegated Why = "delegated"
	// WhyClaimed and WhyReleased: a person claimed an interrupt, or let
	// it go; told to the roles' own addresses only, of a channel whose
	// roles see all their work ([Dispatch.RolesSeeAll]).
	WhyClaimed  Why = "claimed"
	WhyReleased Why = "released"
)

// Recipient is who a notice is for: a person of the directory, or a
// role's own address (Person ""); with [Dispatch.RolesSeeAll], the zero
// Recipient is the channel's own place for an interrupt that names no
// role (Slack's default channel), which an [Addresser] may give.
type Recipient struct {
	Person, Role string
}

// Notice is one interrupt brought before one recipient at one address.
type Notice struct {
	Why Why
	// Interrupt is what waits, without its resume token.
	Interrupt protocol.Interrupted
	// StartedBy is who started the run.
	StartedBy string
	// By is who delegated, claimed or released it; Reason the reason
	// they gave.
	By, Reason string
	Recipient
	// Address is where the channel sends it.
	Address string
	// Link is where the recipient decides: a person's own single-use
	// decision link, or for a role's address the run's page in the
	// inbox. FormToken is the decision link's form token (a person's
	// only), for a channel that decides from the notice itself (Web
	// Push's Approve): the POST of a decision link carries it.
	Link, FormToken string
	// Expires is when the link stops working.
	Expires time.Time
	// EventID is the event's id and At its time; Key is the delivery's
	// record, stable across attempts (a message id can be made of it).
	EventID, Key string
	At           time.Time
}

// Port is what a dispatcher needs of a running Interlock: a client of the
// wire protocol, the JetStream context and names, and the signer of
// decision links. *interlock.Service is one.
type Port interface {
	Client(source string) *client.Client
	JetStream() jetstream.JetStream
	Names() wire.Names
	Links() *links.Signer
}

// Dispatch configures a [Dispatcher].
type Dispatch struct {
	// Directory returns the people and roles as they are now.
	Directory func() *people.Directory
	// PublicURL is the inbox's address, which links start with. Empty for
	// a channel that shows no link (Slack decides in its own buttons):
	// no notice then carries one.
	PublicURL string
	// LinkTTL is how long a decision link works when its interrupt has
	// no deadline. Defaults to DefaultLinkTTL.
	LinkTTL time.Duration
	// Description of the channel's consumer.
	Description string
	// RolesSeeAll makes a role's own address (a team's shared channel)
	// hear every request of the role, also one assigned to or claimed by
	// a person, and each claim and release of it; otherwise (mail) an
	// assigned request reaches its assignees only.
	RolesSeeAll bool
	// FirstRetry, MaxRetry, RetryFor, AckWait and Parallel are the
	// follower's ([Config]). Parallel defaults to DefaultDispatchParallel.
	FirstRetry, MaxRetry, RetryFor, AckWait time.Duration
	Parallel                                int
	// Observe is the follower's ([Config.Observe]).
	Observe func(d Delivery, err error, deadLettered bool)
	// Logger for the dispatcher. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// Defaults of [Dispatch].
const (
	DefaultLinkTTL          = 7 * 24 * time.Hour
	DefaultDispatchParallel = 4
)

// DispatchKinds are the events a dispatcher follows: an interrupt (the
// first ask, an escalation, a quorum's request for the next vote), a
// reminder, and an assignment.
var DispatchKinds = []string{protocol.EventInterrupted, protocol.EventReminded, protocol.EventAssigned}

// SettleKinds are the events a dispatcher of a [Settler] also follows.
var SettleKinds = []string{protocol.EventResumed, protocol.EventExpired, protocol.EventCancelled}

// refusedNote starts the record of an address that refused a notice for
// good, followed by why.
const refusedNote = "refused: "

// Dispatcher brings interrupts before people on one channel.
// [StartDispatch] starts it; [Dispatcher.Stop] stops it.
type Dispatcher struct {
	port Port
	ch   Channel
	cfg  Dispatch
	log  zerolog.Logger
	cl   *client.Client
	sent *Sent
	f    *Follower
	once sync.Once
	// settling serializes the follow-ups of one key in this process: the
	// settling event and a notice's own delivery may both come to it at
	// once, and only one may post.
	settling keyedMutex
}

// keyedMutex is a mutex per key, kept only while someone holds or waits
// for it.
type keyedMutex struct {
	mu   sync.Mutex
	keys map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]*keyedEntry{}
	}
	e := k.keys[key]
	if e == nil {
		e = &keyedEntry{}
		k.keys[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.keys, key)
		}
		k.mu.Unlock()
	}
}

// ConsumerName is the durable consumer of the channel called name.
func ConsumerName(names wire.Names, name string) string { return names.Prefix + "-" + name }

// StartDispatch binds the record of deliveries and the channel's durable
// consumer (made the first time, it starts at the events published from
// then on) and brings each interrupt before the people it reaches, until
// Stop.
func StartDispatch(ctx context.Context, port Port, ch Channel, cfg Dispatch) (*Dispatcher, error) {
	if port == nil || ch == nil {
		return nil, errors.New("notify: StartDispatch needs a Port (such as the *interlock.Service) and a Channel")
	}
	name := ch.Name()
	if name == "" || strings.ContainsAny(name, ". *>") {
		return nil, fmt.Errorf("notify: channel name %q: use A-Z a-z 0-9 _ -", name)
	}
	if cfg.Directory == nil {
		return nil, fmt.Errorf("notify: channel %s: Dispatch.Directory is nil; give it the people directory", name)
	}
	if u, err := url.Parse(cfg.PublicURL); cfg.PublicURL != "" && (err != nil || u.Host == "") {
		return nil, fmt.Errorf("notify: channel %s: the public URL %q is not the inbox's address (https://interlock.example.com)", name, cfg.PublicURL)
	}
	cfg.LinkTTL = cmp.Or(cfg.LinkTTL, DefaultLinkTTL)
	cfg.Parallel = cmp.Or(cfg.Parallel, DefaultDispatchParallel)
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	d := &Dispatcher{port: port, ch: ch, cfg: cfg, log: cfg.Logger.With().Str("channel", name).Logger(), cl: port.Client("/" + name)}
	js, names := port.JetStream(), port.Names()
	sent, err := OpenSent(ctx, js, names, 0, 0)
	if err != nil {
		return nil, err
	}
	d.sent = sent
	kinds := DispatchKinds
	if _, ok := ch.(Settler); ok {
		kinds = append(slices.Clone(kinds), SettleKinds...)
	}
	d.f, err = Follow(ctx, js, names, Config{
		Name: ConsumerName(names, name), Description: cfg.Description, Kinds: kinds,
		FirstRetry: cfg.FirstRetry, MaxRetry: cfg.MaxRetry, RetryFor: cfg.RetryFor, AckWait: cfg.AckWait,
		Parallel: cfg.Parallel, Observe: cfg.Observe, Logger: &d.log,
	}, d.handle)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Stop stops following the events: the events in hand finish, or are
// left to be delivered again when ctx ends. Stopping twice is safe.
func (d *Dispatcher) Stop(ctx context.Context) error {
	var err error
	d.once.Do(func() { err = d.f.Stop(ctx) })
	return err
}

// Name is the channel's consumer.
func (d *Dispatcher) Name() string { return d.f.Name() }

// handle brings one event before the people it reaches.
func (d *Dispatcher) handle(ctx context.Context, dl Delivery) error {
	var (
		why    = WhyAsked
		by     string
		reason string
		req    string
		in     protocol.Interrupted
		err    error
		ev     = dl.Event
	)
	switch dl.Kind {
	case protocol.EventInterrupted:
		var e protocol.Interrupted
		if err := json.Unmarshal(ev.Data(), &e); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		flow, run := e.Flow, e.Run
		req = e.RequestID
		if len(e.Votes) > 0 {
			why = WhyVote
		}
		in, err = d.pending(ctx, flow, run, req)
	case protocol.EventReminded:
		var r protocol.Reminded
		if err := json.Unmarshal(ev.Data(), &r); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		why, req = WhyReminder, r.RequestID
		if in, err = d.pending(ctx, r.Flow, r.Run, r.RequestID); err == nil && in.RequestID != "" {
			in.ApproverRole, in.Assignees, in.ClaimedBy = r.ApproverRole, r.Assignees, r.ClaimedBy
			if r.ExpiresAt != nil {
				in.ExpiresAt = r.ExpiresAt
			}
		}
	case protocol.EventAssigned:
		var a protocol.Assigned
		if err := json.Unmarshal(ev.Data(), &a); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		switch {
		case a.Op == protocol.AssignClaim && d.cfg.RolesSeeAll:
			why = WhyClaimed
		case a.Op == protocol.AssignRelease && d.cfg.RolesSeeAll:
			why = WhyReleased
		case a.Op == protocol.AssignDelegate:
			why = WhyDelegated
		default:
			return nil
		}
		by, reason, req = a.By, a.Reason, a.RequestID
		if in, err = d.pending(ctx, a.Flow, a.Run, a.RequestID); err == nil && in.RequestID != "" {
			in.Assignees, in.ClaimedBy, in.ApproverRole = a.Assignees, a.ClaimedBy, a.ApproverRole
		}
	case protocol.EventResumed:
		var r protocol.Resumed
		if err := json.Unmarshal(ev.Data(), &r); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		return d.settle(ctx, dl, r.Flow, r.Run, r.RequestID, settledBy(protocol.Verdict(r.Decision), r.Approver), decisionDetail(r.Reason, r.Message))
	case protocol.EventExpired:
		var x protocol.Expired
		if err := json.Unmarshal(ev.Data(), &x); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		return d.settle(ctx, dl, x.Flow, x.Run, x.RequestID, "Expired: nobody decided in time", "")
	case protocol.EventCancelled:
		var c protocol.Cancelled
		if err := json.Unmarshal(ev.Data(), &c); err != nil {
			return Permanent(fmt.Errorf("decoding %s: %w", dl.Kind, err))
		}
		what, detail := cancelledBy(c)
		return d.settle(ctx, dl, c.Flow, c.Run, "", what, detail)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if in.RequestID == "" {
		// Settled since (a backlog after a pause, a receiver down): it
		// reaches nobody, as a notice would say it waits.
		d.log.Debug().Str("kind", dl.Kind).Str("request_id", req).Msg("notify: settled since; nobody is told")
		return nil
	}
	return d.post(ctx, dl, in, why, by, reason)
}

// pending returns the interrupt run of flow waits on, when it is still
// request requestID, as the run's checkpoint says (written before any
// event of its transition is published); the zero Interrupted otherwise.
func (d *Dispatcher) pending(ctx context.Context, flow, run, requestID string) (protocol.Interrupted, error) {
	ok, err := StillWaits(ctx, d.port.JetStream(), d.port.Names(), flow, run, requestID)
	if err != nil || !ok {
		return protocol.Interrupted{}, err
	}
	in, err := d.cl.LastInterrupt(ctx, flow, run)
	switch {
	case errors.Is(err, client.ErrNotWaiting), errors.Is(err, client.ErrNotFound):
		return protocol.Interrupted{}, nil
	case err != nil:
		return protocol.Interrupted{}, fmt.Errorf("reading the interrupt of %s %s: %w", flow, run, err)
	}
	in.ResumeToken = ""
	if in.RequestID != requestID {
		return protocol.Interrupted{}, nil
	}
	return in, nil
}

// startedBy is who started the run of in.
func (d *Dispatcher) startedBy(ctx context.Context, in protocol.Interrupted) (string, error) {
	cp, err := d.cl.Checkpoint(ctx, in.Flow, in.Run)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading who started %s %s: %w", in.Flow, in.Run, err)
	}
	return cp.StartedBy, nil
}

// Recipients are who an interrupt reaches: its claimant, else its
// assignees, else the holders of its approver role and of its quorum's
// roles, and those roles' own addresses; never a person who already voted
// on it, nor, with separation of duties, its requester or whoever started
// the run. Each once.
func Recipients(dir *people.Directory, in protocol.Interrupted, startedBy string) []Recipient {
	return recipients(dir, in, startedBy, false)
}

// recipients are [Recipients], with the interrupt's roles' own addresses
// also when it is assigned or claimed if rolesSeeAll.
func recipients(dir *people.Directory, in protocol.Interrupted, startedBy string, rolesSeeAll bool) []Recipient {
	roles := protocol.DeciderRoles(in.ApproverRole, in.Quorum)
	assignees := in.Assignees
	if in.ClaimedBy != "" {
		assignees = []string{in.ClaimedBy}
	}
	ps, rs := dir.Reach(roles, assignees)
	if rolesSeeAll && len(assignees) > 0 {
		_, rs = dir.Reach(roles, nil)
	}
	var out []Recipient
	for _, p := range ps {
		voted := slices.ContainsFunc(in.Votes, func(v protocol.Vote) bool { return v.Approver == p.Name })
		if voted || in.SeparationOfDuties && (p.Name == in.Requester || p.Name == startedBy) {
			continue
		}
		out = append(out, Recipient{Person: p.Name})
	}
	for _, r := range rs {
		out = append(out, Recipient{Role: r.Name})
	}
	if rolesSeeAll && len(roles) == 0 {
		// What names no role goes to the channel's own place, if it has
		// one (Slack's default channel): the zero Recipient.
		out = append(out, Recipient{})
	}
	return out
}

// awayPort is a port that keeps the people's absences (the
// *interlock.Service).
type awayPort interface{ Away() *away.Set }

// withDelegates adds to rs the delegate of each person of rs who is away
// now, once: what waits on them reaches whoever decides it meanwhile
// (never the absence itself, nor a delegate who voted on it).
func (d *Dispatcher) withDelegates(rs []Recipient, in protocol.Interrupted) []Recipient {
	p, ok := d.port.(awayPort)
	if !ok || p.Away() == nil || in.Action == protocol.AbsenceAction {
		return rs
	}
	now := time.Now()
	out := rs
	for _, r := range rs {
		if r.Person == "" {
			continue
		}
		ab, _, ok := p.Away().Of(r.Person, now)
		// Theirs by assignment or claim, or by a role they delegated.
		theirs := in.ClaimedBy == r.Person || slices.Contains(in.Assignees, r.Person) ||
			slices.ContainsFunc(protocol.DeciderRoles(in.ApproverRole, in.Quorum), func(role string) bool {
				return len(ab.Roles) == 0 || slices.Contains(ab.Roles, role)
			})
		if !ok || !theirs || slices.ContainsFunc(out, func(o Recipient) bool { return o.Person == ab.Delegate }) ||
			slices.ContainsFunc(in.Votes, func(v protocol.Vote) bool { return v.Approver == ab.Delegate }) {
			continue
		}
		out = append(out, Recipient{Person: ab.Delegate})
	}
	return out
}

// addresses are where the channel reaches r.
func (d *Dispatcher) addresses(ctx context.Context, dir *people.Directory, r Recipient, in protocol.Interrupted) ([]string, error) {
	if a, ok := d.ch.(Addresser); ok {
		return a.Addresses(ctx, r, in)
	}
	if r.Person != "" {
		p, _ := dir.Person(r.Person)
		if addr := p.Address(d.ch.Name()); addr != "" {
			return []string{addr}, nil
		}
		return nil, nil
	}
	role, _ := dir.Role(r.Role)
	if addr := role.Address(d.ch.Name()); addr != "" {
		return []string{addr}, nil
	}
	return nil, nil
}

// post brings in before everyone it reaches who has not had this event's
// notice, each address at once, so that one slow or failing receiver
// delays no other. An address refused for good is recorded so that the
// event, delivered again, skips it, and the event is dead-lettered naming
// its recipient once the others have theirs; an address that failed
// otherwise has the event tried again, for the addresses still without
// it.
func (d *Dispatcher) post(ctx context.Context, dl Delivery, in protocol.Interrupted, why Why, by, reason string) error {
	startedBy, err := d.startedBy(ctx, in)
	if err != nil {
		return err
	}
	dir := d.cfg.Directory()
	var notices []Notice
	seen := map[string]bool{}
	for _, r := range d.withDelegates(recipients(dir, in, startedBy, d.cfg.RolesSeeAll), in) {
		if r.Person != "" && (why == WhyClaimed || why == WhyReleased) {
			continue
		}
		addrs, err := d.addresses(ctx, dir, r, in)
		if err != nil {
			return err
		}
		for _, addr := range addrs {
			lower := strings.ToLower(addr)
			if addr == "" || seen[lower] {
				continue
			}
			seen[lower] = true
			notices = append(notices, Notice{Why: why, Interrupt: in, StartedBy: startedBy, By: by, Reason: reason, Recipient: r, Address: addr,
				EventID: dl.Event.ID(), Key: Key(d.ch.Name(), dl.Event.ID(), lower), At: dl.Event.Time()})
		}
	}
	switch why {
	case WhyAsked, WhyVote:
		if err := d.supersede(ctx, dl, in, seen); err != nil {
			return err
		}
	case WhyDelegated, WhyClaimed, WhyReleased:
		if d.cfg.RolesSeeAll {
			kept, err := d.stillFollowing(ctx, in, seen)
			if err != nil {
				return err
			}
			for _, p := range kept {
				notices = append(notices, Notice{Why: why, Interrupt: in, StartedBy: startedBy, By: by, Reason: reason,
					Recipient: Recipient{Role: p.Role}, Address: p.Address, EventID: dl.Event.ID(),
					Key: Key(d.ch.Name(), dl.Event.ID(), strings.ToLower(p.Address)), At: dl.Event.Time()})
			}
		}
		if why == WhyDelegated {
			// A person it was delegated away from no longer decides it:
			// their notice is followed up, as for an escalation.
			to := strings.Join(in.Assignees, ", ")
			if to == "" {
				to = "role " + in.ApproverRole
			}
			st := Settled{Flow: in.Flow, Run: in.Run, Kind: dl.Kind, What: "Delegated to " + to, To: to, Detail: reason,
				At: dl.Event.Time(), Data: dl.Event.Data(), EventID: dl.Event.ID()}
			if by != "" {
				st.What = "Delegated by " + by + " to " + to
			}
			if err := d.followUp(ctx, st, func(p postedRecord) bool {
				return p.Person != "" && p.RequestID == in.RequestID && !seen[strings.ToLower(p.Address)]
			}); err != nil {
				return err
			}
		}
	}
	if len(notices) == 0 {
		d.log.Debug().Str("flow", in.Flow).Str("run", in.Run).Str("request_id", in.RequestID).Str("kind", dl.Kind).
			Msg("notify: nobody with an address on this channel is reached by this event")
		return nil
	}
	errs := make([]error, len(notices))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxPostsAtOnce)
	for i := range notices {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = d.deliver(ctx, &notices[i])
		})
	}
	wg.Wait()
	var refused []string
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
		case IsPermanent(err):
			refused = append(refused, d.shown(notices[i].Recipient)+": "+err.Error())
		default:
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if len(refused) > 0 {
		return Permanent(fmt.Errorf("%s refused for good: %s", d.ch.Name(), strings.Join(refused, "; ")))
	}
	return nil
}

// maxPostsAtOnce bounds the posts of one event in flight: a role of many
// holders is posted to a few dozen at a time, not all at once.
const maxPostsAtOnce = 16

// deliver posts n unless its record says it was: sent, or refused for
// good (then it returns the refusal again, as a Permanent error).
func (d *Dispatcher) deliver(ctx context.Context, n *Notice) error {
	note, done, err := d.sent.Note(ctx, n.Key)
	if err != nil {
		return err
	}
	if done {
		if why, ok := strings.CutPrefix(note, refusedNote); ok {
			return Permanent(errors.New(why))
		}
		return nil
	}
	if err := d.link(n); err != nil {
		return err
	}
	in := n.Interrupt
	note, err = d.ch.Post(ctx, *n)
	switch {
	case err == nil:
		if err := d.sent.Mark(ctx, n.Key, cmp.Or(note, "sent")); err != nil {
			return err
		}
		if err := d.posted(ctx, n); err != nil {
			return err
		}
		d.log.Debug().Str("flow", in.Flow).Str("run", in.Run).Str("request_id", in.RequestID).
			Str("person", n.Person).Str("role", n.Role).Str("why", string(n.Why)).Str("note", note).Msg("notify: sent")
		return nil
	case IsPermanent(err) || egress.IsRefused(err):
		if err := d.sent.Mark(ctx, n.Key, refusedNote+err.Error()); err != nil {
			return err
		}
		return Permanent(err)
	default:
		return fmt.Errorf("%s for %s: %w", d.ch.Name(), d.shown(n.Recipient), err)
	}
}

// postedRecord is where a channel that settles brought a run's request:
// one record per run and address, read when the request is settled.
type postedRecord struct {
	Person    string `json:"person,omitempty"`
	Role      string `json:"role,omitempty"`
	Address   string `json:"address"`
	RequestID string `json:"requestId"`
	Heading   string `json:"heading,omitempty"`
}

// postedKeys is the filter of the records of where the run's requests
// went, on the channel called name.
func postedKeys(name, flow, run string) string {
	return Key(name+"-posted", flow, run) + ".*"
}

// posted records that n went to its address, for a channel that settles.
// A run that finished while the notice was on its way (its settling event
// handled before this record was written) is followed up here, as its
// checkpoint says it ended.
func (d *Dispatcher) posted(ctx context.Context, n *Notice) error {
	s, ok := d.ch.(Settler)
	if !ok {
		return nil
	}
	in := n.Interrupt
	rec := postedRecord{Person: n.Person, Role: n.Role, Address: n.Address, RequestID: in.RequestID, Heading: in.Heading()}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(postedKeys(d.ch.Name(), in.Flow, in.Run), "*")
	key := prefix + Key("a", strings.ToLower(n.Address))[2:]
	if err := d.sent.Mark(ctx, key, string(b)); err != nil {
		return err
	}
	cp, err := d.cl.Checkpoint(ctx, in.Flow, in.Run)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s %s: %w", in.Flow, in.Run, err)
	case !cp.Status.Finished():
		return nil
	}
	st := endedSettled(cp)
	st.Flow, st.Run, st.EventID = in.Flow, in.Run, n.EventID
	if st.Kind == protocol.EventCancelled {
		// Who cancelled and why are in the event, not the checkpoint:
		// read it, as the settling event would have brought it.
		if ev, ok := d.endedEvent(ctx, in.Flow, in.Run, st.Kind); ok {
			var c protocol.Cancelled
			if json.Unmarshal(ev.Data(), &c) == nil {
				st.What, st.Detail = cancelledBy(c)
				st.Data, st.At = ev.Data(), ev.Time()
			}
		}
	}
	if err := d.settleOne(ctx, s, rec, st); err != nil {
		return err
	}
	return d.sent.Forget(ctx, key)
}

// cancelledBy says who cancelled a run, and why.
func cancelledBy(c protocol.Cancelled) (what, detail string) {
	what = "Cancelled"
	if c.By != "" {
		what += " by " + c.By
	}
	if c.Reason != "" {
		detail = "Reason: " + c.Reason
	}
	return what, detail
}

// endedEventWait bounds how long endedEvent waits for the event of a run
// found finished: its transition publishes it just after it writes the
// checkpoint.
const endedEventWait = 2 * time.Second

// endedEvent is the run's last event of kind, read from the events
// stream, waiting up to endedEventWait for it to be stored.
func (d *Dispatcher) endedEvent(ctx context.Context, flow, run, kind string) (events.Event, bool) {
	deadline := time.Now().Add(endedEventWait)
	for {
		ev, err := d.cl.LastEvent(ctx, flow, run, kind)
		if err == nil {
			return ev, true
		}
		if !errors.Is(err, client.ErrNotFound) || time.Now().After(deadline) {
			return events.Event{}, false
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return events.Event{}, false
		case <-t.C:
		}
	}
}

// endedSettled is the follow-up of a run found finished, from its
// checkpoint: its last decision as a resumed event's data would say it,
// or its cancellation or expiry.
func endedSettled(cp protocol.Checkpoint) Settled {
	st := Settled{What: ended(cp)}
	var data any
	switch {
	case cp.Status == protocol.StatusCancelled:
		st.Kind, data = protocol.EventCancelled, protocol.Cancelled{Flow: cp.Flow, Run: cp.Run}
	case cp.Status == protocol.StatusExpired:
		st.Kind, data = protocol.EventExpired, protocol.Expired{Flow: cp.Flow, Run: cp.Run}
	case len(cp.Decisions) > 0:
		last := cp.Decisions[len(cp.Decisions)-1]
		st.Kind, st.At = protocol.EventResumed, last.At
		var edits json.RawMessage
		if len(last.Edits) > 0 {
			edits, _ = json.Marshal(last.Edits)
		}
		data = protocol.Resumed{Flow: cp.Flow, Run: cp.Run, RequestID: last.RequestID, Decision: string(last.Verdict),
			Approver: last.Approver, Reason: last.Reason, Message: last.Message, Edits: edits}
		st.Detail = decisionDetail(last.Reason, last.Message)
	}
	if data != nil {
		st.Data, _ = json.Marshal(data)
	}
	return st
}

// decisionDetail is the follow-up's line more on a decision: the reason
// given, or else the answer.
func decisionDetail(reason, message string) string {
	switch {
	case reason != "":
		return "Reason: " + reason
	case message != "":
		return "Answer: " + message
	}
	return ""
}

// ended says how a finished run ended, from its checkpoint.
func ended(cp protocol.Checkpoint) string {
	switch cp.Status {
	case protocol.StatusCancelled:
		return "Cancelled"
	case protocol.StatusExpired:
		return "Expired: nobody decided in time"
	case protocol.StatusFailed:
		return "Failed"
	}
	if n := len(cp.Decisions); n > 0 {
		return settledBy(cp.Decisions[n-1].Verdict, cp.Decisions[n-1].Approver)
	}
	return "Answered"
}

// settledBy says how a decision settled a request: "Approved by ann".
func settledBy(v protocol.Verdict, approver string) string {
	what := "Answered"
	switch v {
	case protocol.VerdictApprove:
		what = "Approved"
	case protocol.VerdictEdit:
		what = "Approved with edits"
	case protocol.VerdictReject:
		what = "Rejected"
	}
	if approver != "" {
		what += " by " + approver
	}
	return what
}

// settleOne follows p up with st (its Flow, Run, Kind, What, Detail, To,
// At, Data and EventID), once per run, request and address whichever of
// the settling event and the notice's own delivery comes to it first.
func (d *Dispatcher) settleOne(ctx context.Context, s Settler, p postedRecord, st Settled) error {
	flow, run := st.Flow, st.Run
	key := Key(d.ch.Name()+"-settled", flow, run, p.RequestID, strings.ToLower(p.Address))
	defer d.settling.lock(key)()
	if done, err := d.sent.Done(ctx, key); err != nil || done {
		return err
	}
	st.Recipient, st.Address, st.RequestID, st.Heading, st.Key = Recipient{Person: p.Person, Role: p.Role}, p.Address, p.RequestID, p.Heading, key
	if base := strings.TrimRight(d.cfg.PublicURL, "/"); base != "" {
		st.Link = base + "/runs/" + url.PathEscape(flow) + "/" + url.PathEscape(run)
	}
	note, err := s.Settle(ctx, st)
	switch {
	case err == nil:
		return d.sent.Mark(ctx, key, cmp.Or(note, "settled"))
	case IsPermanent(err) || egress.IsRefused(err):
		// Nothing more to tell that address of this run.
		d.log.Info().Err(err).Str("flow", flow).Str("run", run).Str("person", p.Person).Msg("notify: a follow-up was refused; it is not tried again")
		return nil
	default:
		return fmt.Errorf("%s follow-up for %s: %w", d.ch.Name(), d.shown(st.Recipient), err)
	}
}

// settle follows a settled request of run up at each address the run's
// requests were brought to, once each, then forgets where they went. It
// does nothing for a channel that does not settle.
func (d *Dispatcher) settle(ctx context.Context, dl Delivery, flow, run, requestID, what, detail string) error {
	st := Settled{Flow: flow, Run: run, Kind: dl.Kind, What: what, Detail: detail, At: dl.Event.Time(), Data: dl.Event.Data(), EventID: dl.Event.ID()}
	return d.followUp(ctx, st, func(postedRecord) bool { return true })
}

// supersede follows up, as moved on, where the run's earlier requests
// were brought and in, which took their place, is not (an escalation to
// another role, a quorum's next vote asked of who has not voted), so
// that no address keeps offering to decide what no longer waits.
// reached are the addresses in reaches, in lower case.
func (d *Dispatcher) supersede(ctx context.Context, dl Delivery, in protocol.Interrupted, reached map[string]bool) error {
	what, to := "Asked again in a newer request", ""
	switch {
	case in.Quorum != nil && len(in.Votes) > 0:
		what = fmt.Sprintf("Voted: %d of %d votes so far; the next vote is asked of who may still give it", len(in.Votes), in.Quorum.Total())
	case in.ClaimedBy != "":
		to = in.ClaimedBy
	case len(in.Assignees) > 0:
		to = strings.Join(in.Assignees, ", ")
	case len(protocol.DeciderRoles(in.ApproverRole, in.Quorum)) > 0:
		to = strings.Join(protocol.DeciderRoles(in.ApproverRole, in.Quorum), ", ")
	}
	if to != "" && what == "Asked again in a newer request" {
		what = "Moved on: now for " + to
	}
	st := Settled{Flow: in.Flow, Run: in.Run, Kind: dl.Kind, What: what, To: to, At: dl.Event.Time(), Data: dl.Event.Data(), EventID: dl.Event.ID()}
	return d.followUp(ctx, st, func(p postedRecord) bool {
		return p.RequestID != in.RequestID && !reached[strings.ToLower(p.Address)]
	})
}

// stillFollowing are the roles' addresses, not among reached, that were
// brought in's request: a team's channel that had a request follows it
// until it is settled, also when it was delegated to another role.
func (d *Dispatcher) stillFollowing(ctx context.Context, in protocol.Interrupted, reached map[string]bool) ([]postedRecord, error) {
	if _, ok := d.ch.(Settler); !ok {
		return nil, nil
	}
	keys, err := d.sent.Keys(ctx, postedKeys(d.ch.Name(), in.Flow, in.Run))
	if err != nil {
		return nil, err
	}
	var out []postedRecord
	for _, k := range keys {
		note, found, err := d.sent.Note(ctx, k)
		if err != nil {
			return nil, err
		}
		var p postedRecord
		if !found || json.Unmarshal([]byte(note), &p) != nil {
			continue
		}
		lower := strings.ToLower(p.Address)
		if p.Person == "" && p.RequestID == in.RequestID && !reached[lower] {
			reached[lower] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// followUp follows up, once each, the addresses the run's requests were
// brought to that match, then forgets where they went. It does nothing
// for a channel that does not settle.
func (d *Dispatcher) followUp(ctx context.Context, st Settled, match func(postedRecord) bool) error {
	s, ok := d.ch.(Settler)
	if !ok {
		return nil
	}
	keys, err := d.sent.Keys(ctx, postedKeys(d.ch.Name(), st.Flow, st.Run))
	if err != nil {
		return err
	}
	var failed []error
	var done []string
	for _, k := range keys {
		note, found, err := d.sent.Note(ctx, k)
		if err != nil {
			return err
		}
		var p postedRecord
		if !found || json.Unmarshal([]byte(note), &p) != nil || !match(p) {
			continue
		}
		if err := d.settleOne(ctx, s, p, st); err != nil {
			failed = append(failed, err)
			continue
		}
		done = append(done, k)
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	for _, k := range done {
		if err := d.sent.Forget(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// shown names a recipient in errors and dead letters: a person's name or
// a role, never an address (a Teams URL, a push endpoint is a credential).
func (d *Dispatcher) shown(r Recipient) string {
	switch {
	case r.Person != "":
		return r.Person
	case r.Role == "":
		return "the channel's own place"
	}
	return "role " + r.Role
}

// link sets where n's recipient decides: a person's own signed decision
// link, or for a role's address the run's page in the inbox.
func (d *Dispatcher) link(n *Notice) error {
	in := n.Interrupt
	base := strings.TrimRight(d.cfg.PublicURL, "/")
	if base == "" {
		return nil
	}
	if n.Person == "" {
		n.Link = base + "/runs/" + url.PathEscape(in.Flow) + "/" + url.PathEscape(in.Run)
		return nil
	}
	n.Expires = time.Now().Add(d.cfg.LinkTTL)
	if in.ExpiresAt != nil {
		n.Expires = *in.ExpiresAt
	}
	signer := d.port.Links()
	c := links.Claims{Kind: links.KindDecide, ID: links.NewID(), Flow: in.Flow, Run: in.Run,
		RequestID: in.RequestID, Person: n.Person, Expires: n.Expires.Unix()}
	text, err := signer.Sign(c)
	if err != nil {
		return fmt.Errorf("signing the decision link of %s: %w", n.Person, err)
	}
	n.Link, n.FormToken = base+links.DecidePath+text, signer.FormToken(c.ID)
	return nil
}
