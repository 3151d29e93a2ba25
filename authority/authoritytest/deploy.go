package authoritytest

import (
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Directory is the fixture's directory of people: each of [People] as
// person makes them (with a token, a Slack user), or with their name and
// roles alone when person is nil; roles are the directory's roles (a
// role's Slack channel).
func Directory(person func(Person) people.Person, roles ...people.Role) *people.Directory {
	var ps []people.Person
	for _, p := range People() {
		if person != nil {
			ps = append(ps, person(p))
		} else {
			ps = append(ps, people.Person{Name: p.Name, Roles: p.Roles})
		}
	}
	d, err := people.New("people.yaml", ps, roles)
	if err != nil {
		panic("authoritytest: the fixture's directory: " + err.Error())
	}
	return d
}

// GateRules are [Rules], parsed.
func GateRules() *gate.RuleSet {
	rs, err := gate.Parse([]byte(Rules), "rules.yaml")
	if err != nil {
		panic("authoritytest: the fixture's gate rules: " + err.Error())
	}
	return rs
}

// Deploy is cfg with the fixture's deployment: dir as its directory of
// people (in force), the fixture's gate rules, and ops as the role that
// reads and cancels any run.
func Deploy(cfg interlock.Config, dir *people.Directory) interlock.Config {
	cfg.People = people.NewLive(dir)
	cfg.GateRules = GateRules()
	cfg.CancelRoles, cfg.ReadRoles = []string{OpsRole}, []string{OpsRole}
	return cfg
}

// Vouched is a client of svc vouched for the fixture's person who, as a
// surface that authenticated them by token sends.
func Vouched(t *testing.T, svc *interlock.Service, who string) *client.Client {
	t.Helper()
	p, ok := PersonNamed(who)
	if !ok {
		t.Fatalf("authoritytest: no person %s", who)
	}
	cl, err := svc.ClientAs("/conformance", protocol.Caller{Name: p.Name, Method: protocol.AuthToken, Roles: p.Roles})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// StartBeside makes run r named id beside a surface that starts nothing:
// r's request (a tool call or an ask), sent by a client of svc vouched
// for its starter. It returns its flow and run once it waits, or for an
// approved run once it is approved; a claimed run is still to be
// claimed.
func StartBeside(t *testing.T, svc *interlock.Service, r Run, id string) (flow, run string) {
	t.Helper()
	by := Vouched(t, svc, r.StartedBy)
	if req := r.ToolRequest(id); req != nil {
		ans, err := by.AskTool(t.Context(), *req, 10*time.Second)
		if err != nil || ans.Pending == nil {
			t.Fatalf("starting %s: %+v %v, want the call pending", r.Key, ans, err)
		}
		if r.ApprovedBy != "" {
			Approve(t, svc, r, id)
		}
		return protocol.GateFlow, id
	}
	ans, err := by.AskNoWait(t.Context(), *r.AskRequest(id), 10*time.Second)
	if err != nil || ans.Pending == nil {
		t.Fatalf("starting %s: %+v %v, want the ask pending", r.Key, ans, err)
	}
	return protocol.AskFlow, id
}

// Approve has r.ApprovedBy approve run r named id, a tool call, through a
// client of svc vouched for them, and waits for the decision.
func Approve(t *testing.T, svc *interlock.Service, r Run, id string) {
	t.Helper()
	cl := Vouched(t, svc, r.ApprovedBy)
	cp, err := cl.Checkpoint(t.Context(), protocol.GateFlow, id)
	if err != nil || cp.Interrupt == nil {
		t.Fatalf("reading %s: %+v %v", id, cp, err)
	}
	ev, err := cl.Resume(t.Context(), protocol.GateFlow, id, protocol.Resume{RequestID: cp.Interrupt.RequestID, Decision: string(protocol.VerdictApprove)})
	if err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("%s approving %s: %s %v", r.ApprovedBy, id, ev.Kind, err)
	}
}
