package authority_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheAuthorityAnswersTheConformanceTable runs the table every surface
// runs, against the authority itself.
func TestTheAuthorityAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceAuthority, authorityDoor{authority.New(authoritytest.Config(true))})
}

// authorityDoor asks the authority directly, callers authenticated by
// token.
type authorityDoor struct{ a *authority.Authority }

func (authorityDoor) Skip(authoritytest.Case) string { return "" }

func (authorityDoor) Start(_ *testing.T, r authoritytest.Run, _ string) (flow, run string) {
	return r.Flow, r.Key
}

func (d authorityDoor) Ask(t *testing.T, c authoritytest.Case, _, key string) protocol.Code {
	run := authoritytest.RunNamed(key).AuthorityRun()
	caller := c.Caller(d.a, protocol.AuthToken)
	var err error
	if c.Action == authority.Decide && c.Verdict != "" {
		err = d.a.MayDecide(caller, run, c.Verdict)
	} else {
		err = d.a.May(caller, c.Action, run)
	}
	var ref *authority.Refusal
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ref):
		return ref.Code
	}
	t.Fatalf("%s %s on %s: %v, not a refusal", c.Who, c.Action, key, err)
	return ""
}

// TestANameANATSSenderTypesIsALabelWhereCallersAreIdentified checks that
// a NATS sender is the caller, once, whatever name it types, once a
// directory of people is in force; and that nobody is identified without
// one.
func TestANameANATSSenderTypesIsALabelWhereCallersAreIdentified(t *testing.T) {
	t.Parallel()
	identified := authority.New(authority.Config{Identified: func() bool { return true }})
	for _, named := range []string{"x1@nowhere", "x2@nowhere", authoritytest.Ann} {
		c := identified.NATSCaller("", named, "/bot")
		if c.Name != "nats:/bot" || c.Named != named || c.Method != protocol.AuthNATS {
			t.Errorf("identified, %q typed: caller %+v, want nats:/bot with the name as a label", named, c)
		}
	}
	// A role subject's senders are one caller where the NATS server
	// authenticates them.
	roles := authority.New(authority.Config{RoleSubjects: true})
	a, b := roles.NATSCaller("supervisor", "x1@nowhere", "/bot"), roles.NATSCaller("supervisor", "x2@nowhere", "/other")
	if a.Name != b.Name || a.Name != "nats:supervisor" || a.Method != protocol.AuthRoleSubject {
		t.Errorf("role subject: callers %+v and %+v, want one caller nats:supervisor", a, b)
	}
	// Where a directory is in force but the NATS server lets anyone
	// publish (the embedded server's anonymous clients), a role subject
	// holds no role.
	if c := identified.NATSCaller("supervisor", "ann", "/bot"); c.Method != protocol.AuthNATS || len(c.Roles) > 0 {
		t.Errorf("identified, unauthenticated role subject: caller %+v, want a sender with no role", c)
	}
	local := authority.New(authority.Config{})
	if c := local.NATSCaller("", "ann", "/bot"); c.Name != "ann" {
		t.Errorf("not identified: caller %+v, want the typed name", c)
	}
}

// TestEveryRoleStandsForNoneWhereCallersAreIdentified checks that the
// local user's vouch (every role) holds only where no directory is in
// force.
func TestEveryRoleStandsForNoneWhereCallersAreIdentified(t *testing.T) {
	t.Parallel()
	p := authority.Local("local").Protocol()
	if c := authority.New(authority.Config{}).Vouched(p); !c.AllRoles {
		t.Errorf("no directory: %+v, want every role", c)
	}
	if c := authority.New(authority.Config{Identified: func() bool { return true }}).Vouched(p); c.AllRoles || len(c.Roles) > 0 {
		t.Errorf("a directory in force: %+v, want no role", c)
	}
}

// TestTheAuthorityStandsOnTheProtocolAlone checks that the authority
// depends on no surface, transport or engine: on protocol alone.
func TestTheAuthorityStandsOnTheProtocolAlone(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/interlockhq/interlock/authority").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/interlockhq/interlock"
	allowed := map[string]bool{module + "/authority": true, module + "/protocol": true, module + "/internal/jsonw": true}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && !allowed[dep] {
			t.Errorf("authority depends on %s; it may use protocol alone", dep)
		}
	}
}

// TestADelegateHoldsWhatTheAbsentPersonDelegatedAndNoMore: while ann is
// away, ben (vouched) holds the roles she delegated that she still
// holds, and decides her assignments and claims; never her absence's
// end; a NATS sender named ben gets nothing; outside the period, nothing.
func TestADelegateHoldsWhatTheAbsentPersonDelegatedAndNoMore(t *testing.T) {
	now := time.Now()
	held := map[string][]string{"ann": {"finance", "legal"}}
	absences := []authority.Absence{{Person: "ann", Delegate: "ben", Roles: []string{"finance", "ops"}, From: now.Add(-time.Hour), To: now.Add(time.Hour)}}
	a := authority.New(authority.Config{Identified: func() bool { return true },
		Absences: func() []authority.Absence { return absences },
		RolesOf:  func(p string) ([]string, bool) { r, ok := held[p]; return r, ok }})
	ben := a.Vouched(protocol.Caller{Name: "ben", Method: protocol.AuthToken})
	if !slices.Equal(ben.Roles, []string{"finance"}) || !slices.Equal(ben.For, []string{"ann"}) {
		t.Fatalf("ben while ann is away: roles %v for %v; want finance (ops she does not hold, legal she kept) for ann", ben.Roles, ben.For)
	}
	run := func(p authority.Pending) authority.Run {
		p.Kind, p.RequestID = protocol.KindApproval, "rq"
		return authority.Run{ID: "refund r-1", Pending: &p}
	}
	for _, c := range []struct {
		name string
		p    authority.Pending
		ok   bool
	}{
		{"her role's approval", authority.Pending{ApproverRole: "finance"}, true},
		{"a role she kept", authority.Pending{ApproverRole: "legal"}, false},
		{"assigned to her", authority.Pending{Assignees: []string{"ann"}}, true},
		{"claimed by her", authority.Pending{ApproverRole: "legal", ClaimedBy: "ann"}, true},
		{"her absence's end", authority.Pending{Assignees: []string{"ann"}, Action: protocol.AbsenceAction}, false},
	} {
		err := a.MayDecide(ben, run(c.p), protocol.VerdictApprove)
		if (err == nil) != c.ok {
			t.Errorf("%s: ben may decide: %v, want %v", c.name, err, c.ok)
		}
	}
	if sender := a.Vouched(protocol.Caller{Name: "ben", Method: protocol.AuthNATS}); len(sender.Roles) != 0 || len(sender.For) != 0 {
		t.Errorf("a NATS sender named ben is widened: %+v", sender)
	}
	absences[0].From, absences[0].To = now.Add(time.Hour), now.Add(2*time.Hour)
	if later := a.Vouched(protocol.Caller{Name: "ben", Method: protocol.AuthToken}); len(later.Roles) != 0 || len(later.For) != 0 {
		t.Errorf("ben before the absence begins: %+v", later)
	}
	delete(held, "ann")
	absences[0].From = now.Add(-time.Hour)
	if gone := a.Vouched(protocol.Caller{Name: "ben", Method: protocol.AuthToken}); len(gone.Roles) != 0 {
		t.Errorf("ben for someone no longer in the directory: %+v", gone)
	}
}
