package slackbridge_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/slackbridge"
)

// slackUsers are the Slack user ids of the conformance table's people;
// the agents have none.
var slackUsers = map[string]string{
	authoritytest.Ann: "U0ANN",
	authoritytest.Bob: "U0BOB",
	authoritytest.Fin: "U0FIN",
	authoritytest.Ray: "U0RAY",
	authoritytest.Ops: "U0OPS",
}

// Channels of the conformance deployment: the supervisors' (the
// directory's channel of the role) and the one that takes the rest.
const (
	supervisorsChannel = "C0SUPERVISORS"
	generalChannel     = "C0GENERAL"
)

// nobody is a Slack user of the workspace whom the directory does not
// know: how an agent, which has no Slack user, would click.
const nobody = "U0NOBODY"

// TestTheSlackBridgeAnswersTheConformanceTable runs the authority's table
// through Slack: each person of the directory is a Slack user, who clicks
// the buttons of the message the bridge posted for the run and fills in
// its modals, signed as Slack signs them; what the bridge tells them
// alone, and the run read back, say whether they were let through.
func TestTheSlackBridgeAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceSlack, startSlackDoor(t))
}

// TestASlackUserTheDirectoryDoesNotKnowIsRefusedEverywhere: an agent has
// no Slack user, so its click would be that of a Slack user the
// directory does not map to anyone. Every button of an approval, and
// every modal someone else opened, is refused to them with what to ask
// an admin; nothing opens, nothing reaches the engine, nothing changes.
func TestASlackUserTheDirectoryDoesNotKnowIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	d := startSlackDoor(t)
	flow, run := d.Start(t, authoritytest.RunNamed(authoritytest.Refund), "refund-nobody")
	before := d.checkpoint(t, flow, run)
	actions := buttonsOf(d.message(t, flow, run))
	for _, want := range []string{"interlock_approve", "interlock_reject", "interlock_edit", "interlock_claim", "interlock_delegate"} {
		if !slices.Contains(actions, want) {
			t.Fatalf("the approval's message has buttons %v, want %s among them", actions, want)
		}
	}
	for _, action := range actions {
		told, opened := d.click(t, nobody, action, flow, run)
		if len(told) != 1 || !strings.Contains(told[0], "not set up") || !strings.Contains(told[0], nobody) {
			t.Errorf("%s: told %q, want that they are not set up, naming their Slack user id", action, told)
		}
		if opened != nil {
			t.Errorf("%s opened a modal for a Slack user nobody knows", action)
		}
	}
	// Modals a supervisor opened, submitted as the stranger.
	for action, inputs := range map[string]map[string]any{
		"interlock_edit":     {},
		"interlock_delegate": {"delegate_person": person(slackUsers[authoritytest.Bob])},
	} {
		_, opened := d.click(t, slackUsers[authoritytest.Ann], action, flow, run)
		if opened == nil {
			t.Fatalf("%s opened no modal for a supervisor", action)
		}
		errs := submitted(t, sendTo(t, d.h.b, submitState(nobody, *opened, inputs), time.Now(), secret))
		if len(errs) != 1 || !strings.Contains(strings.Join(slices.Sorted(maps.Values(errs)), ""), "not set up") {
			t.Errorf("the %s modal submitted by a stranger: errors %v, want that they are not set up", action, errs)
		}
	}
	d.unchanged(t, flow, run, before)
	if ref, ok := d.refused(t, flow, run); ok {
		t.Errorf("a stranger's interactions reached the engine, which refused %s: %s", ref.Code, ref.Message)
	}
}

// slackDoor is the Slack bridge as the table's door, on a deployment
// whose directory maps each person of the table to a Slack user.
type slackDoor struct {
	h *harness
	// mu makes one click at a time, so that what the bridge tells while
	// it answers one (chat.postEphemeral) is that click's: it tells
	// before it answers Slack.
	mu sync.Mutex
	// clicks numbers the trigger ids of the clicks.
	clicks atomic.Int64
}

// startSlackDoor starts a deployment with the table's directory, gate
// rules and roles, and a bridge on it talking to a fake Slack.
func startSlackDoor(t *testing.T) *slackDoor {
	t.Helper()
	dir := authoritytest.Directory(func(p authoritytest.Person) people.Person {
		return people.Person{Name: p.Name, Roles: p.Roles, Slack: slackUsers[p.Name]}
	}, people.Role{Name: authoritytest.Supervisor, Slack: supervisorsChannel})
	cfg := authoritytest.Deploy(interlock.Config{Flows: []*engine.Flow{refund.Flow()}, Secret: natstest.Secret}, dir)
	live := cfg.People
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), cfg)
	h := &harness{t: t, svc: svc, slack: newFakeSlack(t)}
	h.cfg = slackbridge.Config{
		Token: "xoxb-test", SigningSecret: secret, Addr: "127.0.0.1:0", APIURL: h.slack.srv.URL + "/api/", Egress: fakeSlackAllowed,
		DefaultChannel: generalChannel, People: live.Current,
		// As long as Slack waits: the engine answers before the bridge
		// answers Slack, or the person is told nothing.
		ResponseWait: 3 * time.Second,
	}
	h.start()
	return &slackDoor{h: h}
}

// Start makes run r beside Slack, as the bridge starts nothing: r's
// starter asks through a client vouched for them. Once the bridge posted
// it, a claimant claims it with the message's Claim button.
func (d *slackDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	flow, run = authoritytest.StartBeside(t, d.h.svc, r, id)
	if claimant := r.Pending.ClaimedBy; claimant != "" {
		if told, _ := d.click(t, slackUsers[claimant], "interlock_claim", flow, run); len(told) > 0 {
			t.Fatalf("%s claiming %s: told %q", claimant, r.Key, told)
		}
		natstest.Eventually(t, claimant+" holding "+run, func() bool {
			in := d.checkpoint(t, flow, run).Interrupt
			return in != nil && in.ClaimedBy == claimant
		})
	}
	return flow, run
}

// Ask has the case's person click what Slack offers for the action on
// the run's message: Approve, or Reject (with the modal's reason when it
// asks one), Claim, or Delegate… to bob in its modal.
func (d *slackDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	user := slackUsers[c.Who]
	before := d.checkpoint(t, flow, run)
	var told []string
	var opened *call
	var inputs map[string]any
	switch {
	case c.Action == authority.Decide && (c.Verdict == "" || c.Verdict == protocol.VerdictApprove):
		told, opened = d.click(t, user, "interlock_approve", flow, run)
		if opened != nil {
			t.Fatal("Approve opened a modal")
		}
	case c.Action == authority.Decide && c.Verdict == protocol.VerdictReject:
		told, opened = d.click(t, user, "interlock_reject", flow, run)
		inputs = map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": "conformance"}}
	case c.Action == authority.Claim:
		told, opened = d.click(t, user, "interlock_claim", flow, run)
	case c.Action == authority.Delegate:
		told, opened = d.click(t, user, "interlock_delegate", flow, run)
		if opened == nil && len(told) == 0 {
			t.Fatal("Delegate… neither opened its modal nor told why not")
		}
		inputs = map[string]any{"delegate_person": person(slackUsers[authoritytest.Bob])}
	default:
		t.Fatalf("the Slack door has no %s %s", c.Action, c.Verdict)
	}
	if opened != nil {
		if len(told) > 0 {
			t.Fatalf("a modal opened, and %s was told %q", c.Who, told)
		}
		told = slices.Sorted(maps.Values(submitted(t, sendTo(t, d.h.b, submitState(user, *opened, inputs), time.Now(), secret))))
	}
	return d.outcome(t, c, flow, run, before, told)
}

// outcome is the code of the refusal the case's person was told, after
// checking the run: a refusal leaves it as it was, and says the engine's
// refusal of the command, or else the authority's of the action the
// bridge asked it about before it sent anything; told nothing, the run
// shows the action as the person's, vouched for by Slack.
func (d *slackDoor) outcome(t *testing.T, c authoritytest.Case, flow, run string, before protocol.Checkpoint, told []string) protocol.Code {
	t.Helper()
	if len(told) == 0 {
		var late *protocol.Refused
		natstest.Eventually(t, fmt.Sprintf("%s's %s on %s", c.Who, c.Action, run), func() bool {
			if ref, ok := d.refused(t, flow, run); ok {
				late = &ref
				return true
			}
			return d.did(t, c, flow, run)
		})
		if late != nil {
			t.Errorf("the engine refused %s (%s) and %s was told nothing", late.Code, late.Message, c.Who)
			return late.Code
		}
		return ""
	}
	if len(told) > 1 {
		t.Errorf("%s was told %d things: %q", c.Who, len(told), told)
	}
	d.unchanged(t, flow, run, before)
	if ref, ok := d.refused(t, flow, run); ok {
		return d.toldEngines(t, c, ref, told[0])
	}
	a := d.h.svc.Authority()
	r := authority.RunOf(d.checkpoint(t, flow, run))
	err := a.May(c.Caller(a, protocol.AuthSlack), c.Action, r)
	if c.Action == authority.Decide {
		err = a.MayDecide(c.Caller(a, protocol.AuthSlack), r, cmpVerdict(c.Verdict))
	}
	var ref *authority.Refusal
	if errors.As(err, &ref) && told[0] == ref.Tell() {
		return ref.Code
	}
	// Not the authority's word: the engine's refusal, which the bridge
	// hears as it is published, a moment before the stream that the run's
	// events are read from has stored it.
	var eng protocol.Refused
	natstest.Eventually(t, fmt.Sprintf("the engine's refusal that %s was told of (%q)", c.Who, told[0]), func() bool {
		var ok bool
		eng, ok = d.refused(t, flow, run)
		return ok
	})
	return d.toldEngines(t, c, eng, told[0])
}

// toldEngines checks that told says the engine's refusal ref, and
// returns its code.
func (d *slackDoor) toldEngines(t *testing.T, c authoritytest.Case, ref protocol.Refused, told string) protocol.Code {
	t.Helper()
	if !strings.Contains(strings.ToLower(told), strings.ToLower(strings.TrimSuffix(ref.Message, "."))) {
		t.Errorf("the engine refused %s (%s); %s was told %q", ref.Code, ref.Message, c.Who, told)
	}
	return ref.Code
}

// did reports whether the run's audit records the case's action as its
// person's, authenticated by Slack.
func (d *slackDoor) did(t *testing.T, c authoritytest.Case, flow, run string) bool {
	t.Helper()
	var actions []string
	switch c.Action {
	case authority.Decide:
		actions = []string{protocol.ActionApproved, protocol.ActionVoted}
		if c.Verdict == protocol.VerdictReject {
			actions = []string{protocol.ActionRejected}
		}
	case authority.Claim:
		actions = []string{protocol.ActionClaimed}
	case authority.Delegate:
		actions = []string{protocol.ActionDelegated}
	}
	recs, err := d.h.svc.Client("/conformance").Audit(t.Context(), flow, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.By == c.Who && slices.Contains(actions, rec.Action) {
			if rec.Auth != protocol.AuthSlack {
				t.Errorf("%s %s as authenticated by %q, want by Slack", rec.By, rec.Action, rec.Auth)
			}
			return true
		}
	}
	return false
}

// refused is the last refusal the engine published for the run.
func (d *slackDoor) refused(t *testing.T, flow, run string) (protocol.Refused, bool) {
	t.Helper()
	evs, _, err := d.h.svc.Client("/conformance").RunEvents(t.Context(), flow, run, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ref protocol.Refused
	found := false
	for _, ev := range evs {
		if ev.Kind == protocol.EventRefused {
			if err := json.Unmarshal(ev.Event.Data(), &ref); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	return ref, found
}

// unchanged fails unless the run still waits on the request it waited on
// before, with the same claimant, assignees, role and votes.
func (d *slackDoor) unchanged(t *testing.T, flow, run string, before protocol.Checkpoint) {
	t.Helper()
	now := d.checkpoint(t, flow, run)
	was, is := before.Interrupt, now.Interrupt
	if now.Status != protocol.StatusWaiting || is == nil || is.RequestID != was.RequestID || is.ClaimedBy != was.ClaimedBy ||
		!slices.Equal(is.Assignees, was.Assignees) || is.ApproverRole != was.ApproverRole || len(is.Votes) != len(was.Votes) {
		t.Errorf("after a refusal %s is %s, waiting on %+v; it was waiting on %+v", run, now.Status, is, was)
	}
}

// click has Slack user click action on the run's message as it stands,
// and returns what the bridge told them alone meanwhile and the modal it
// opened for them, if any.
func (d *slackDoor) click(t *testing.T, user, action, flow, run string) (told []string, opened *call) {
	t.Helper()
	msg := d.message(t, flow, run)
	if !slices.Contains(buttonsOf(msg), action) {
		t.Fatalf("the message of %s has no %s button: %v", run, action, buttonsOf(msg))
	}
	payload := click(user, action, msg)
	trigger := fmt.Sprintf("trig-%s-%d", user, d.clicks.Add(1))
	payload["trigger_id"] = trigger
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.h.slack.of("chat.postEphemeral"))
	if resp := sendTo(t, d.h.b, payload, time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("%s clicking %s: %d", user, action, resp.StatusCode)
	}
	for _, e := range d.h.slack.of("chat.postEphemeral")[n:] {
		if e.Form.Get("user") != user || e.Form.Get("channel") != msg.Form.Get("channel") {
			t.Errorf("%s clicking %s in %s: an ephemeral to %s in %s", user, action, msg.Form.Get("channel"), e.Form.Get("user"), e.Form.Get("channel"))
		}
		told = append(told, e.Form.Get("text"))
	}
	for _, v := range d.h.slack.of("views.open") {
		if v.JSON["trigger_id"] == trigger {
			opened = &v
		}
	}
	return told, opened
}

// message is the run's message as Slack shows it now: the bridge's last
// post or update of it, with its buttons.
func (d *slackDoor) message(t *testing.T, flow, run string) call {
	t.Helper()
	var got call
	natstest.Eventually(t, "the message of "+run, func() bool {
		d.h.slack.mu.Lock()
		defer d.h.slack.mu.Unlock()
		for _, c := range slices.Backward(d.h.slack.calls) {
			if (c.Method == "chat.postMessage" || c.Method == "chat.update") &&
				strings.Contains(c.Form.Get("blocks"), "("+flow+" · "+run+")") && strings.Contains(c.Form.Get("blocks"), "interlock_actions") {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

// checkpoint reads the run back.
func (d *slackDoor) checkpoint(t *testing.T, flow, run string) protocol.Checkpoint {
	t.Helper()
	cp, err := d.h.svc.Client("/conformance").Checkpoint(t.Context(), flow, run)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// buttonsOf are the action ids of a message's buttons.
func buttonsOf(msg call) []string {
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
		} `json:"elements"`
	}
	_ = json.Unmarshal([]byte(msg.Form.Get("blocks")), &blocks)
	var out []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID != "" {
				out = append(out, e.ActionID)
			}
		}
	}
	return out
}

// cmpVerdict is v, approve when empty.
func cmpVerdict(v protocol.Verdict) protocol.Verdict {
	if v == "" {
		return protocol.VerdictApprove
	}
	return v
}

// TestTheEditModalOpensOnlyForWhoMayEdit: an edit is a vote where votes
// are counted, so the supervisor who asked for a two-person refund
// herself is refused the Edit modal when she clicks, with the
// authority's reason, rather than when she submits it; another
// supervisor gets the modal.
func TestTheEditModalOpensOnlyForWhoMayEdit(t *testing.T) {
	t.Parallel()
	d := startSlackDoor(t)
	flow, run := d.Start(t, authoritytest.RunNamed(authoritytest.Quorum), "quorum-edit")
	told, opened := d.click(t, slackUsers[authoritytest.Ann], "interlock_edit", flow, run)
	if opened != nil || len(told) != 1 || !strings.Contains(told[0], "asked for") {
		t.Fatalf("the requester clicking Edit: told %q, modal opened %v; want no modal and the reason", told, opened != nil)
	}
	if _, opened := d.click(t, slackUsers[authoritytest.Bob], "interlock_edit", flow, run); opened == nil {
		t.Fatal("another supervisor clicking Edit: no modal")
	}
}
