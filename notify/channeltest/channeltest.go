// Package channeltest is the conformance suite of Interlock's channels:
// every channel on the [notify.Dispatcher] seam (mail, Web Push, ...)
// passes [Run], with a fake of its remote side (an SMTP server, a push
// service) that the channel's own tests provide as a [Harness]. The suite
// drives a real Interlock on an embedded NATS server and checks what the
// remote side received: each decider reached once, reminders, quorums,
// backlogs, restarts, Retry-After, dead letters, slow receivers, and no
// link or token in a log. Channels of events to systems (webhooks) pass
// [RunEvents], the suite's part for what stands on [notify.Follow]
// rather than on the dispatcher.
package channeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/away"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Role is the approver role of everything the suite asks; OtherRole the
// role of a second run when the channel reaches roles only.
const (
	Role      = "finance"
	OtherRole = "audit"
)

// PublicURL is the inbox's address the suite's links start with.
const PublicURL = "https://interlock.example.com"

// Features are what a channel does besides posting to people.
type Features struct {
	// Roles: the channel reaches a role's own address (a mailing list, a
	// team's channel) besides its holders.
	Roles bool
	// RetryAfter: the remote side can say when to come back (HTTP 429 or
	// 503 with Retry-After), and the channel passes it on with
	// [notify.RetryAfter].
	RetryAfter bool
	// SecretAddresses: an address is a credential (a push endpoint, a
	// webhook URL) that no log, error or dead letter may show.
	SecretAddresses bool
	// Settle: the channel follows up what it sent once the request is
	// settled ([notify.Settler]).
	Settle bool
	// RolesOnly: the channel reaches roles' own addresses only (a team's
	// channel), never a person's; it implies Roles. The suite then checks
	// what each role's address receives where it would check people.
	RolesOnly bool
}

// Answer is how the fake remote side answers an address.
type Answer int

// Answers of the remote side.
const (
	// Accept takes the notice.
	Accept Answer = iota
	// Fail fails for now (a 503, an SMTP 4xx): the channel returns an
	// error to be tried again.
	Fail
	// Refuse refuses for good (a 410, an SMTP 5xx): the channel returns a
	// [notify.Permanent] error.
	Refuse
	// Throttle asks to come back after [ThrottleFor] (a 429 with
	// Retry-After); only with Features.RetryAfter.
	Throttle
	// Hang holds the notice unanswered until the address is answered
	// otherwise, or the channel gives up.
	Hang
)

// ThrottleFor is the wait a Throttle answer asks for.
const ThrottleFor = 3 * time.Second

// Received is one notice as the remote side took it.
type Received struct {
	// Address is where it went, as [Harness.Reach] returned it.
	Address string
	// Link is the link it carries: a person's decision link, or a run's
	// page in the inbox.
	Link string
	// Run is the run it is about, as flow/run, for a channel whose
	// notices to a role carry no link (Slack's buttons name the run).
	Run string
	// Text is what it says, as words (a subject and a body, a title).
	Text string
	// Settle marks a follow-up of a settled request.
	Settle bool
}

// Harness is a channel under test.
type Harness struct {
	// Name is the channel's name ([notify.Channel.Name]).
	Name     string
	Features Features
	// New makes a fake of the channel's remote side for one scenario,
	// stopped at t's cleanup.
	New func(t *testing.T) Remote
}

// Remote is a fake of a channel's remote side (an SMTP server, a push
// service), and how to start the channel against it.
type Remote interface {
	// Reach makes person reachable on the channel. It returns the
	// address to put in the directory under addresses.<name> ("" when
	// the channel finds its addresses elsewhere, as Web Push does, having
	// subscribed them on svc) and the address notices to them reach.
	Reach(t *testing.T, svc *interlock.Service, person string) (directory, address string)
	// RoleAddress is the address of a role's own (Features.Roles,
	// Features.RolesOnly).
	RoleAddress(role string) string
	// Start starts the channel on svc with cfg and returns what stops it.
	Start(t *testing.T, svc *interlock.Service, cfg notify.Dispatch) (stop func())
	// Received returns what the remote side took so far, in order.
	Received() []Received
	// Answer sets how the remote side answers address from now on; a
	// notice it holds (Hang) is answered so.
	Answer(address string, a Answer)
}

// rig is one scenario's Interlock, directory and channel.
type rig struct {
	t     *testing.T
	h     Harness
	rem   Remote
	svc   *interlock.Service
	dir   *people.Directory
	addr  map[string]string
	log   *natstest.Buffer
	mu    sync.Mutex
	stop  func()
	links *links.Signer
	// people are the persons the channel reaches (none for a channel of
	// roles only); receivers every address the suite checks, by who
	// (a person, or role:<name>).
	people    []string
	receivers []string
}

// people of the suite's directory: ann, cat and eve hold finance and are
// reachable; bob holds finance with no address; dan is support.
var reachable = []string{"ann", "cat", "eve"}

// gateRules hold every issue_refund for finance.
const gateRules = `
rules:
  - name: refunds
    tool: issue_refund
    title: "Refund {{args.amount}}"
    reason: Every refund needs finance.
    approverRole: finance
    timeout: 1h
`

// newRig starts an Interlock on a server of its own, the directory with
// h's addresses, and the channel.
func newRig(t *testing.T, h Harness) *rig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	rules, err := gate.Parse([]byte(gateRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, h: h, rem: h.New(t), addr: map[string]string{}, log: &natstest.Buffer{}}
	r.svc = natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{Flow()}, Secret: natstest.Secret, GateRules: rules})
	r.links = r.svc.Links()
	var ps []people.Person
	for _, name := range reachable {
		dirAddr, addr := r.rem.Reach(t, r.svc, name)
		r.addr[name] = addr
		p := people.Person{Name: name, Roles: []string{Role}}
		if dirAddr != "" {
			p.Addresses = map[string]string{h.Name: dirAddr}
		}
		ps = append(ps, p)
	}
	ps = append(ps, people.Person{Name: "bob", Roles: []string{Role}}, people.Person{Name: "dan", Roles: []string{"support"}})
	if !h.Features.RolesOnly {
		// fay holds no role: she decides only as someone's delegate.
		dirAddr, addr := r.rem.Reach(t, r.svc, "fay")
		r.addr["fay"] = addr
		p := people.Person{Name: "fay"}
		if dirAddr != "" {
			p.Addresses = map[string]string{h.Name: dirAddr}
		}
		ps = append(ps, p)
	}
	var roles []people.Role
	if h.Features.Roles || h.Features.RolesOnly {
		names := []string{Role}
		if h.Features.RolesOnly {
			names = append(names, OtherRole)
		}
		for _, role := range names {
			r.addr["role:"+role] = r.rem.RoleAddress(role)
			roles = append(roles, people.Role{Name: role, Addresses: map[string]string{h.Name: r.rem.RoleAddress(role)}})
		}
	}
	r.people, r.receivers = reachable, reachable
	if h.Features.RolesOnly {
		r.people, r.receivers = nil, []string{"role:" + Role}
	}
	if r.dir, err = people.New("channeltest", ps, roles); err != nil {
		t.Fatal(err)
	}
	r.start()
	t.Cleanup(r.halt)
	return r
}

// start starts the channel, logging at debug into r.log.
func (r *rig) start() {
	r.t.Helper()
	logger := zerolog.New(r.log).Level(zerolog.DebugLevel)
	stop := r.rem.Start(r.t, r.svc, notify.Dispatch{
		Directory: func() *people.Directory { return r.dir }, PublicURL: PublicURL,
		FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, AckWait: 5 * time.Second,
		Logger: &logger,
	})
	r.mu.Lock()
	r.stop = stop
	r.mu.Unlock()
}

// halt stops the channel, if it runs.
func (r *rig) halt() {
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// startRefund starts a refund run of state and waits for its approval.
func (r *rig) startRefund(run string, s refundState) protocol.Interrupted {
	r.t.Helper()
	b, _ := json.Marshal(s)
	var state map[string]json.RawMessage
	_ = json.Unmarshal(b, &state)
	if _, err := r.svc.Client("/channeltest").Start(r.t.Context(), "refund", run, state, nil); err != nil {
		r.t.Fatal(err)
	}
	return r.pending("refund", run)
}

// pending waits for the approval run waits on.
func (r *rig) pending(flow, run string) protocol.Interrupted {
	r.t.Helper()
	var in protocol.Interrupted
	natstest.Eventually(r.t, flow+" "+run+" waiting", func() bool {
		var err error
		in, err = r.svc.Client("/channeltest").LastInterrupt(r.t.Context(), flow, run)
		return err == nil
	})
	return in
}

// decide decides run's approval as who.
func (r *rig) decide(flow, run string, in protocol.Interrupted, who, decision string) {
	r.t.Helper()
	res := protocol.Resume{RequestID: in.RequestID, Decision: decision}
	if decision == "reject" {
		res.Reason = "a duplicate"
	}
	ev, err := r.svc.ResumeAs(r.t.Context(), r.svc.Client("/channeltest"), flow, run, res, who, []string{Role})
	if err != nil || ev.Kind == protocol.EventRefused {
		r.t.Fatalf("%s deciding %s %s: %s %v", who, flow, run, ev.Kind, err)
	}
}

// to is what reached who (a person, or role:<name>) about the request
// of in: for a person, the notices whose decision link is for it; for a
// role's address, which is sent the run's page, the run's notices.
func (r *rig) to(who string, in protocol.Interrupted) []Received {
	var out []Received
	for _, m := range r.rem.Received() {
		if m.Address != r.addr[who] || m.Settle {
			continue
		}
		if strings.HasPrefix(who, "role:") {
			if m.Link == PublicURL+"/runs/"+in.Flow+"/"+in.Run || m.Link == "" && m.Run == in.Flow+"/"+in.Run {
				out = append(out, m)
			}
			continue
		}
		if r.requestOf(m) == in.RequestID {
			out = append(out, m)
		}
	}
	return out
}

// requestOf is the request a notice's decision link is for; for a run's
// page, "page:" and the link.
func (r *rig) requestOf(m Received) string {
	text, ok := strings.CutPrefix(m.Link, PublicURL+links.DecidePath)
	if !ok {
		return "page:" + m.Link
	}
	c, err := r.links.Check(text, links.KindDecide, time.Now())
	if err != nil {
		r.t.Errorf("a notice to %s carries a decision link that does not check: %v", m.Address, err)
		return ""
	}
	return c.RequestID
}

// waitFor waits until who has n notices about the request of in.
func (r *rig) waitFor(who string, in protocol.Interrupted, n int) {
	r.t.Helper()
	natstest.Eventually(r.t, fmt.Sprintf("%d notice(s) to %s", n, who), func() bool { return len(r.to(who, in)) >= n })
}

// idle waits until the channel's consumer has nothing pending or in hand
// and no attempt waits in the retry stream.
func (r *rig) idle() {
	r.t.Helper()
	names := r.svc.Names()
	name := notify.ConsumerName(names, r.h.Name)
	natstest.Eventually(r.t, "the channel is idle", func() bool {
		c, err := r.svc.JetStream().Consumer(r.t.Context(), names.EventStream(), name)
		if err != nil {
			return false
		}
		info, err := c.Info(r.t.Context())
		waiting, werr := notify.Waiting(r.t.Context(), r.svc.JetStream(), names, name)
		return err == nil && werr == nil && info.NumPending == 0 && info.NumAckPending == 0 && waiting == 0
	})
}

// exactly fails unless who has n notices about the request of in.
func (r *rig) exactly(who string, in protocol.Interrupted, n int) {
	r.t.Helper()
	if got := r.to(who, in); len(got) != n {
		r.t.Errorf("%s got %d notice(s) of %s %s (request %s), want %d", who, len(got), in.Flow, in.Run, in.RequestID, n)
	}
}

// shown is how an error or a dead letter names who: a person's name, or
// "role <name>".
func shown(who string) string {
	if role, ok := strings.CutPrefix(who, "role:"); ok {
		return "role " + role
	}
	return who
}

// Run runs the suite against the channel of h.
func Run(t *testing.T, h Harness) {
	t.Run("EachDeciderOnce", func(t *testing.T) { t.Parallel(); eachDeciderOnce(t, h) })
	t.Run("GateCallsAndAsks", func(t *testing.T) { t.Parallel(); gateCallsAndAsks(t, h) })
	t.Run("Reminds", func(t *testing.T) { t.Parallel(); reminds(t, h) })
	t.Run("OnlyWhoMayStillVote", func(t *testing.T) { t.Parallel(); onlyWhoMayStillVote(t, h) })
	t.Run("BacklogSkipsSettledWork", func(t *testing.T) { t.Parallel(); backlogSkipsSettled(t, h) })
	t.Run("RestartDoesNotPostTwice", func(t *testing.T) { t.Parallel(); restartDoesNotPostTwice(t, h) })
	t.Run("RetryAfter", func(t *testing.T) {
		if !h.Features.RetryAfter {
			t.Skip("the channel declares no Retry-After")
		}
		t.Parallel()
		retryAfter(t, h)
	})
	t.Run("PoisonIsDeadLettered", func(t *testing.T) { t.Parallel(); poisonIsDeadLettered(t, h) })
	t.Run("FollowsUpOnSettle", func(t *testing.T) {
		if !h.Features.Settle {
			t.Skip("the channel declares no follow-up")
		}
		t.Parallel()
		followsUpOnSettle(t, h)
	})
	t.Run("SlowReceiverDelaysNoOther", func(t *testing.T) { t.Parallel(); slowReceiver(t, h) })
	t.Run("AnAbsentPersonsDelegateIsReached", func(t *testing.T) {
		if h.Features.RolesOnly {
			t.Skip("the channel reaches roles' addresses only")
		}
		t.Parallel()
		absentDelegate(t, h)
	})
}

// absentDelegate: while ann is away, having named fay (who holds no
// role), what waits on ann's role reaches fay too, with a decision link
// of her own; once ann is back, fay is not told.
func absentDelegate(t *testing.T, h Harness) {
	r := newRig(t, h)
	ann, err := r.svc.ClientAs("/channeltest", protocol.Caller{Name: "ann", Roles: []string{Role}, Method: protocol.AuthService})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := away.Begin(t.Context(), ann, r.svc.Away(), r.dir, "ann", []string{Role}, away.Request{Delegate: "fay", To: time.Now().Add(time.Hour)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	in := r.startRefund("r-away", refundState{Amount: 4800})
	r.waitFor("fay", in, 1)
	for _, m := range r.to("fay", in) {
		text, _ := strings.CutPrefix(m.Link, PublicURL+links.DecidePath)
		if c, err := r.links.Check(text, links.KindDecide, time.Now()); err != nil || c.Person != "fay" {
			t.Errorf("fay's notice links to %+v (%v), want a decision link of hers", c, err)
		}
	}
	if _, err := away.End(t.Context(), ann, r.svc.Away(), "ann", time.Now()); err != nil {
		t.Fatal(err)
	}
	back := r.startRefund("r-back", refundState{Amount: 4800})
	r.waitFor("ann", back, 1)
	r.idle()
	r.exactly("fay", back, 0)
}

// eachDeciderOnce: an approval reaches each holder of its role who has an
// address, and the role's own address if the channel has one, once, each
// person with a decision link of their own and the role with the run's
// page; nobody else; and nothing of it (a link, a token, a secret
// address) is logged.
func eachDeciderOnce(t *testing.T, h Harness) {
	r := newRig(t, h)
	in := r.startRefund("r-once", refundState{Amount: 4800})
	for _, who := range r.receivers {
		r.waitFor(who, in, 1)
	}
	roleToo := h.Features.Roles && !h.Features.RolesOnly
	if roleToo {
		r.waitFor("role:"+Role, in, 1)
	}
	r.idle()
	want := len(r.receivers)
	if roleToo {
		want++
	}
	if got := len(r.rem.Received()); got != want {
		t.Errorf("%d notices, want %d (one to each of %v, and the role's own address: %v)", got, want, r.receivers, roleToo)
	}
	for _, who := range r.people {
		r.exactly(who, in, 1)
		for _, m := range r.to(who, in) {
			text, _ := strings.CutPrefix(m.Link, PublicURL+links.DecidePath)
			if c, err := r.links.Check(text, links.KindDecide, time.Now()); err != nil || c.Person != who || c.Flow != "refund" || c.Run != "r-once" {
				t.Errorf("%s's notice links to %+v (%v), want a decision link of theirs", who, c, err)
			}
		}
	}
	if h.Features.Roles || h.Features.RolesOnly {
		r.exactly("role:"+Role, in, 1)
		for _, m := range r.rem.Received() {
			if m.Address == r.addr["role:"+Role] && m.Link != PublicURL+"/runs/refund/r-once" && (m.Link != "" || m.Run != "refund/r-once") {
				t.Errorf("the role's notice links to %q (about %q), want the run's page", m.Link, m.Run)
			}
		}
	}
	for _, m := range r.rem.Received() {
		if !strings.Contains(m.Text, "Refund $4,800.00") {
			t.Errorf("a notice to %s does not say what is asked (Refund $4,800.00): %q", m.Address, m.Text)
		}
	}
	noSecretsLogged(t, r)
}

// noSecretsLogged fails when r's log holds a link, a resume token, or a
// secret address.
func noSecretsLogged(t *testing.T, r *rig) {
	t.Helper()
	log := r.log.String()
	if strings.Contains(log, links.DecidePath) {
		t.Errorf("a link was logged:\n%s", log)
	}
	for _, m := range r.rem.Received() {
		if u, err := url.Parse(m.Link); err == nil && strings.HasPrefix(m.Link, PublicURL+links.DecidePath) && strings.Contains(log, strings.TrimPrefix(u.Path, links.DecidePath)) {
			t.Errorf("a decision link's text was logged")
		}
	}
	for who, addr := range r.addr {
		if r.h.Features.SecretAddresses && addr != "" && strings.Contains(log, addr) {
			t.Errorf("the address of %s, a credential, was logged", who)
		}
	}
	if strings.Contains(log, "resumeToken") {
		t.Errorf("a resume token was logged:\n%s", log)
	}
}

// gateCallsAndAsks: a gated tool call and an ask reach the deciders as a
// flow's approval does.
func gateCallsAndAsks(t *testing.T, h Harness) {
	r := newRig(t, h)
	answer, err := r.svc.Client("/channeltest").AskTool(t.Context(), protocol.ToolRequest{CallID: "c-1", Tool: "issue_refund", Agent: "support-bot",
		Args: map[string]json.RawMessage{"amount": json.RawMessage(`900`)}}, natstest.Wait)
	if err != nil || answer.Pending == nil {
		t.Fatalf("asking for issue_refund: %v %+v; want it pending", err, answer)
	}
	if _, err := r.svc.Client("/channeltest").Ask(t.Context(), askApproval("ask-1"), 0); err != nil {
		t.Fatal(err)
	}
	gateIn := r.pending(protocol.GateFlow, "c-1")
	askIn := r.pending(protocol.AskFlow, "ask-1")
	for _, who := range r.receivers {
		r.waitFor(who, gateIn, 1)
		r.waitFor(who, askIn, 1)
	}
	r.idle()
	for _, who := range r.receivers {
		r.exactly(who, gateIn, 1)
		r.exactly(who, askIn, 1)
	}
}

// reminds: a reminder of an approval still waiting reaches its deciders
// again.
func reminds(t *testing.T, h Harness) {
	r := newRig(t, h)
	in := r.startRefund("r-remind", refundState{Amount: 700, Remind: true})
	for _, who := range r.receivers {
		r.waitFor(who, in, 2)
	}
	r.idle()
	for _, who := range r.receivers {
		r.exactly(who, in, 2)
	}
}

// onlyWhoMayStillVote: a quorum's approval never reaches its requester;
// once a person votes, the request for the next vote reaches the others
// only (and a role's own address, which hears it as the next notice of
// the run).
func onlyWhoMayStillVote(t *testing.T, h Harness) {
	r := newRig(t, h)
	in := r.startRefund("r-quorum", refundState{Amount: 9000, Quorum: 2, Requester: "cat"})
	for _, who := range r.receivers {
		if who != "cat" {
			r.waitFor(who, in, 1)
		}
	}
	r.decide("refund", "r-quorum", in, "ann", "approve")
	next := r.pending("refund", "r-quorum")
	if next.RequestID == in.RequestID {
		natstest.Eventually(t, "the approval asked again", func() bool {
			next = r.pending("refund", "r-quorum")
			return next.RequestID != in.RequestID
		})
	}
	if h.Features.RolesOnly {
		r.waitFor("role:"+Role, next, 2)
		r.idle()
		r.exactly("role:"+Role, next, 2)
		return
	}
	r.waitFor("eve", next, 1)
	r.idle()
	r.exactly("ann", next, 0)
	r.exactly("cat", in, 0)
	r.exactly("cat", next, 0)
	r.exactly("eve", next, 1)
}

// backlogSkipsSettled: stopped, the channel misses nothing; started
// again, it posts what still waits and nothing decided meanwhile.
func backlogSkipsSettled(t *testing.T, h Harness) {
	r := newRig(t, h)
	r.halt()
	settled := r.startRefund("r-settled", refundState{Amount: 4800})
	r.decide("refund", "r-settled", settled, "ann", "reject")
	waits := r.startRefund("r-waits", refundState{Amount: 4800})
	r.start()
	for _, who := range r.receivers {
		r.waitFor(who, waits, 1)
	}
	r.idle()
	for _, who := range r.receivers {
		r.exactly(who, settled, 0)
		r.exactly(who, waits, 1)
	}
}

// restartDoesNotPostTwice: a receiver failing while the others take
// theirs; the channel restarted; the receiver back: each has the notice
// once.
func restartDoesNotPostTwice(t *testing.T, h Harness) {
	r := newRig(t, h)
	failing, others := r.receivers[0], r.receivers[1:]
	r.rem.Answer(r.addr[failing], Fail)
	in := r.startRefund("r-restart", refundState{Amount: 4800})
	for _, who := range others {
		r.waitFor(who, in, 1)
	}
	retried(t, r)
	r.halt()
	r.rem.Answer(r.addr[failing], Accept)
	r.start()
	r.waitFor(failing, in, 1)
	r.idle()
	for _, who := range r.receivers {
		r.exactly(who, in, 1)
	}
}

// retried waits until the channel has scheduled an attempt after a
// failure.
func retried(t *testing.T, r *rig) {
	t.Helper()
	names := r.svc.Names()
	natstest.Eventually(t, "an attempt scheduled after a failure", func() bool {
		n, err := notify.Waiting(t.Context(), r.svc.JetStream(), names, notify.ConsumerName(names, r.h.Name))
		return err == nil && n > 0
	})
}

// retryAfter: a receiver's Retry-After sets when the next attempt is
// due, as its schedule in the retry stream says.
func retryAfter(t *testing.T, h Harness) {
	r := newRig(t, h)
	throttled, others := r.receivers[0], r.receivers[1:]
	r.rem.Answer(r.addr[throttled], Throttle)
	in := r.startRefund("r-throttled", refundState{Amount: 4800})
	for _, who := range others {
		r.waitFor(who, in, 1)
	}
	names := r.svc.Names()
	st, err := r.svc.JetStream().Stream(t.Context(), names.RetryStream())
	if err != nil {
		t.Fatal(err)
	}
	var due, stored time.Time
	natstest.Eventually(t, "the next attempt scheduled", func() bool {
		m, err := st.GetLastMsgForSubject(t.Context(), names.RetriesOf(notify.ConsumerName(names, h.Name)))
		if err != nil {
			return false
		}
		at, ok := strings.CutPrefix(m.Header.Get(bus.HeaderSchedule), "@at ")
		if !ok {
			return false
		}
		due, err = time.Parse(time.RFC3339Nano, at)
		stored = m.Time
		return err == nil
	})
	if wait := due.Sub(stored); wait < ThrottleFor-time.Second {
		t.Errorf("the next attempt is due %s after the throttled one, want about the %s the receiver asked for", wait, ThrottleFor)
	}
	r.rem.Answer(r.addr[throttled], Accept)
	r.waitFor(throttled, in, 1)
	r.idle()
	for _, who := range r.receivers {
		r.exactly(who, in, 1)
	}
}

// poisonIsDeadLettered: an address refused for good is not tried again;
// the others have theirs, and the event is dead-lettered naming the
// person (or the role), never a secret address.
func poisonIsDeadLettered(t *testing.T, h Harness) {
	r := newRig(t, h)
	refused, others := r.receivers[0], r.receivers[1:]
	r.rem.Answer(r.addr[refused], Refuse)
	in := r.startRefund("r-poison", refundState{Amount: 4800})
	names := r.svc.Names()
	var m *jetstream.RawStreamMsg
	natstest.Eventually(t, "the event dead-lettered", func() bool {
		s, err := r.svc.JetStream().Stream(t.Context(), names.DeadLetterStream())
		if err != nil {
			return false
		}
		m, err = s.GetLastMsgForSubject(t.Context(), names.DeadLetter(notify.ReasonUndeliverable))
		return err == nil
	})
	if got := m.Header.Get(bus.HeaderConsumer); got != notify.ConsumerName(names, h.Name) {
		t.Errorf("dead letter of consumer %q, want the channel's", got)
	}
	why := m.Header.Get(bus.HeaderError)
	if !strings.Contains(why, shown(refused)) {
		t.Errorf("the dead letter's error does not name %s: %q", shown(refused), why)
	}
	if h.Features.SecretAddresses && strings.Contains(why, r.addr[refused]) {
		t.Errorf("the dead letter shows the address of %s, a credential: %q", refused, why)
	}
	r.idle()
	r.exactly(refused, in, 0)
	for _, who := range others {
		r.exactly(who, in, 1)
	}
}

// slowReceiver: a receiver that does not answer holds back no one else,
// neither on the same event nor on the next; answered, it has each
// notice once. A channel of roles only is checked with a second run for
// another role.
func slowReceiver(t *testing.T, h Harness) {
	r := newRig(t, h)
	slow, others := r.receivers[0], r.receivers[1:]
	r.rem.Answer(r.addr[slow], Hang)
	first := r.startRefund("r-slow-1", refundState{Amount: 100})
	for _, who := range others {
		r.waitFor(who, first, 1)
	}
	next := refundState{Amount: 200}
	nextOthers := others
	if h.Features.RolesOnly {
		next.Role, nextOthers = OtherRole, []string{"role:" + OtherRole}
	}
	second := r.startRefund("r-slow-2", next)
	for _, who := range nextOthers {
		r.waitFor(who, second, 1)
	}
	if n := len(r.to(slow, first)) + len(r.to(slow, second)); n != 0 {
		t.Errorf("%s, who hangs, took %d notices", slow, n)
	}
	r.rem.Answer(r.addr[slow], Accept)
	r.waitFor(slow, first, 1)
	r.idle()
	r.exactly(slow, first, 1)
	for _, who := range others {
		r.exactly(who, first, 1)
	}
	for _, who := range nextOthers {
		r.exactly(who, second, 1)
	}
	if !h.Features.RolesOnly {
		r.exactly(slow, second, 1)
	}
}

// settles are the follow-ups who received.
func (r *rig) settles(who string) []Received {
	var out []Received
	for _, m := range r.rem.Received() {
		if m.Settle && m.Address == r.addr[who] {
			out = append(out, m)
		}
	}
	return out
}

// followsUpOnSettle: once an approval is decided, everyone it was brought
// to hears how, once; and a cancelled run's notices are followed up too.
func followsUpOnSettle(t *testing.T, h Harness) {
	r := newRig(t, h)
	in := r.startRefund("r-settle", refundState{Amount: 4800})
	for _, who := range r.receivers {
		r.waitFor(who, in, 1)
	}
	r.decide("refund", "r-settle", in, "ann", "approve")
	for _, who := range r.receivers {
		natstest.Eventually(t, who+" told the approval was decided", func() bool { return len(r.settles(who)) >= 1 })
	}
	r.idle()
	for _, who := range r.receivers {
		got := r.settles(who)
		if len(got) != 1 || !strings.Contains(got[0].Text, "Approved by ann") {
			t.Errorf("%s's follow-ups: %+v, want one saying Approved by ann", who, got)
		}
	}
	last := r.receivers[len(r.receivers)-1]
	if !h.Features.RolesOnly {
		// Delegated to eve, the request no longer waits on ann and cat:
		// their notices are followed up; eve is told.
		moved := r.startRefund("r-moved", refundState{Amount: 300})
		for _, who := range r.people {
			r.waitFor(who, moved, 1)
		}
		ev, err := r.svc.AssignAs(t.Context(), r.svc.Client("/channeltest"), "refund", "r-moved",
			protocol.Assign{RequestID: moved.RequestID, Op: protocol.AssignDelegate, To: "eve"}, "ann", []string{Role})
		if err != nil || ev.Kind == protocol.EventRefused {
			t.Fatalf("delegating to eve: %s %v", ev.Kind, err)
		}
		for _, who := range []string{"ann", "cat"} {
			natstest.Eventually(t, who+" told it was delegated", func() bool {
				for _, m := range r.settles(who) {
					if strings.Contains(m.Text, "Delegated by ann to eve") {
						return true
					}
				}
				return false
			})
		}
		r.waitFor("eve", moved, 2)
	}
	other := r.startRefund("r-cancel", refundState{Amount: 100})
	r.waitFor(last, other, 1)
	if _, err := r.svc.Client("/channeltest").Cancel(t.Context(), "refund", "r-cancel", "a duplicate"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, last+" told the run was cancelled", func() bool {
		for _, m := range r.settles(last) {
			if strings.Contains(strings.ToLower(m.Text), "cancelled") {
				return true
			}
		}
		return false
	})
}

// Answers keeps how a fake remote side answers each address, for a
// [Remote]'s Answer: Await holds a Hang until the address is answered
// otherwise. The zero Answers answers Accept everywhere.
type Answers struct {
	mu   sync.Mutex
	m    map[string]Answer
	wake chan struct{}
}

// Set answers addr with a from now on, and lets a held Await see it.
func (s *Answers) Set(addr string, a Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]Answer{}
	}
	s.m[addr] = a
	s.wakeLocked()
}

// Release answers Accept everywhere, letting every held Await go (for a
// test's cleanup).
func (s *Answers) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
	s.wakeLocked()
}

func (s *Answers) wakeLocked() {
	if s.wake != nil {
		close(s.wake)
	}
	s.wake = make(chan struct{})
}

// Await is how to answer addr: it holds while the answer is Hang, until
// it changes or ctx ends (then it returns Hang).
func (s *Answers) Await(ctx context.Context, addr string) Answer {
	for {
		s.mu.Lock()
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		a, wake := s.m[addr], s.wake
		s.mu.Unlock()
		if a != Hang {
			return a
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Hang
		}
	}
}
