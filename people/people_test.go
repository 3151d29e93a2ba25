package people_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/people"
)

const (
	annHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
	bobHash = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752" // sha256("test2")
)

const sample = `people:
  - name: ann@example.com
    roles: [supervisor, legal]
    tokenSha256: ` + annHash + `
    slack: U012AB3CD
    email: Ann@Example.com
    teams: ann@example.com
  - name: bob
    roles: [supervisor]
    tokenSha256: ` + bobHash + `
  - name: carol
roles:
  - name: supervisor
    slack: C0REFUNDS
    email: supervisors@example.com
    teams: https://example.webhook.office.com/workflows/1
`

func TestParseFindsEachPersonByEveryHandle(t *testing.T) {
	t.Parallel()
	d, err := people.Parse([]byte(sample), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 3 || d.Name() != "people.yaml" || string(d.Source()) != sample {
		t.Fatalf("Len %d, Name %q, Source changed", d.Len(), d.Name())
	}
	for what, got := range map[string]func() (people.Person, bool){
		"Person":  func() (people.Person, bool) { return d.Person("ann@example.com") },
		"ByToken": func() (people.Person, bool) { return d.ByToken("test") },
		"BySlack": func() (people.Person, bool) { return d.BySlack("U012AB3CD") },
		"ByEmail": func() (people.Person, bool) { return d.ByEmail("ANN@example.COM") },
	} {
		p, ok := got()
		if !ok || p.Name != "ann@example.com" || !p.Holds("legal") || p.Holds("finance") {
			t.Errorf("%s: %+v, %v; want ann, holding legal", what, p, ok)
		}
	}
	if p, ok := d.ByToken("test2"); !ok || p.Name != "bob" {
		t.Errorf("bob's token finds %+v, %v", p, ok)
	}
	for what, ok := range map[string]bool{
		"an unknown token": okOf(d.ByToken("nope")),
		"an empty token":   okOf(d.ByToken("")),
		"a token's hash":   okOf(d.ByToken(annHash)),
		"an unknown name":  okOf(d.Person("dave")),
		"a Slack channel":  okOf(d.BySlack("C0REFUNDS")),
		"a role's address": okOf(d.ByEmail("supervisors@example.com")),
	} {
		if ok {
			t.Errorf("%s finds someone", what)
		}
	}
	var holders []string
	for _, p := range d.Holders("supervisor") {
		holders = append(holders, p.Name)
	}
	if strings.Join(holders, ",") != "ann@example.com,bob" || len(d.Holders("nobody")) != 0 {
		t.Errorf("holders of supervisor: %v", holders)
	}
	if r, ok := d.Role("supervisor"); !ok || r.Slack != "C0REFUNDS" || r.Email != "supervisors@example.com" {
		t.Errorf("Role(supervisor) = %+v, %v", r, ok)
	}
	if r, ok := d.Role("legal"); ok || r.Name != "legal" || r.Slack != "" {
		t.Errorf("Role(legal), which has no channels, = %+v, %v", r, ok)
	}
	// What a lookup returns is a copy.
	p, _ := d.Person("bob")
	p.Roles[0] = "admin"
	if q, _ := d.Person("bob"); !q.Holds("supervisor") || q.Holds("admin") {
		t.Errorf("changing a returned person changed the directory: %+v", q)
	}
}

func okOf(_ people.Person, ok bool) bool { return ok }

func TestReachGoesToAssigneesElseToTheRolesHoldersAndChannels(t *testing.T) {
	t.Parallel()
	d, err := people.Parse([]byte(sample), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names := func(ps []people.Person) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return strings.Join(out, ",")
	}
	ps, rs := d.Reach([]string{"supervisor", "legal"}, nil)
	if names(ps) != "ann@example.com,bob" || len(rs) != 2 || rs[0].Slack != "C0REFUNDS" || rs[1].Name != "legal" {
		t.Errorf("Reach(roles) = %s, %+v", names(ps), rs)
	}
	ps, rs = d.Reach([]string{"supervisor"}, []string{"carol", "stranger", "carol"})
	if names(ps) != "carol" || rs != nil {
		t.Errorf("Reach(assignees) = %s, %+v; want carol once and no role", names(ps), rs)
	}
}

func TestNoDirectoryKnowsNobody(t *testing.T) {
	t.Parallel()
	var d *people.Directory
	if d.Len() != 0 || okOf(d.ByToken("test")) || okOf(d.Person("ann")) || okOf(d.BySlack("U1")) || okOf(d.ByEmail("a@b.c")) ||
		d.Holders("x") != nil || d.People() != nil || d.Roles() != nil || d.Source() != nil {
		t.Fatal("a nil directory found something")
	}
	if r, ok := d.Role("x"); ok || r.Name != "x" {
		t.Fatalf("Role of nil = %+v, %v", r, ok)
	}
	if ps, rs := d.Reach([]string{"x"}, nil); len(ps) != 0 || len(rs) != 1 {
		t.Fatalf("Reach of nil = %v, %v", ps, rs)
	}
	if e := people.Empty(); e == nil || e.Len() != 0 {
		t.Fatal("Empty is not a directory of nobody")
	}
}

func TestParseRefusesBadDirectoriesSayingWhatAndHow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		wantErr    []string
	}{
		{"unknown field", "people:\n  - name: ann\n    role: [x]\n", []string{"people.yaml", "field role not found", "tokenSha256, slack, email, teams"}},
		{"not a directory", "- name: ann\n", []string{"people.yaml", "a list `people`"}},
		{"bad name", "people:\n  - name: ann smith\n", []string{"person 1", `"ann smith"`, "use only A-Z a-z 0-9 . _ @ -"}},
		{"no name", "people:\n  - roles: [x]\n", []string{"person 1", "use 1 to 128"}},
		{"name twice", "people:\n  - name: ann\n  - name: ann\n", []string{"person 2 (ann)", "also person 1's", "unique"}},
		{"bad role", "people:\n  - name: ann\n    roles: [a.b]\n", []string{"person 1 (ann)", `"a.b"`, "use only A-Z a-z 0-9 _ -"}},
		{"bad hash", "people:\n  - name: ann\n    tokenSha256: abc\n", []string{"person 1 (ann)", "64 hex digits", "interlock people add"}},
		{"hash twice", "people:\n  - name: ann\n    tokenSha256: " + annHash + "\n  - name: bob\n    tokenSha256: " + strings.ToUpper(annHash) + "\n", []string{"person 2 (bob)", "also ann's", "rotate-token"}},
		{"bad slack id", "people:\n  - name: ann\n    slack: '<!channel>'\n", []string{"person 1 (ann)", "not a Slack user id", "Copy member ID"}},
		{"slack twice", "people:\n  - name: ann\n    slack: U1\n  - name: bob\n    slack: U1\n", []string{"person 2 (bob)", "Slack user U1 is also ann's"}},
		{"bad email", "people:\n  - name: ann\n    email: 'Ann <ann@example.com>'\n", []string{"person 1 (ann)", "not an address such as ann@example.com"}},
		{"email twice", "people:\n  - name: ann\n    email: a@example.com\n  - name: bob\n    email: A@example.com\n", []string{"person 2 (bob)", "also ann's"}},
		{"bad teams account", "people:\n  - name: ann\n    teams: ann\n", []string{"person 1 (ann)", "teams", "user principal name"}},
		{"bad role name", "roles:\n  - name: 'a b'\n", []string{"role 1", `"a b"`}},
		{"role twice", "roles:\n  - name: x\n  - name: x\n", []string{"role 2 (x)", "listed twice"}},
		{"bad role channel", "roles:\n  - name: x\n    slack: general\n", []string{"role 1 (x)", "not a Slack channel id", "About tab"}},
		{"bad role address", "roles:\n  - name: x\n    email: nobody\n", []string{"role 1 (x)", "not an address"}},
		{"teams not https", "roles:\n  - name: x\n    teams: http://example.com/hook\n", []string{"role 1 (x)", "https:// URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := people.Parse([]byte(tc.yaml), "people.yaml")
			if err == nil {
				t.Fatal("parsed")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !strings.HasPrefix(err.Error(), "people: people.yaml") {
				t.Errorf("error %q does not begin by naming the source", err)
			}
		})
	}
}

// TestParseErrorsNeverQuoteAValue: a value in the wrong place (a token's
// hash, a Teams URL) is not repeated in the error, which is logged.
func TestParseErrorsNeverQuoteAValue(t *testing.T) {
	t.Parallel()
	for _, y := range []string{
		"people:\n  - name: ann\n    roles: " + annHash + "\n",
		"roles: https://example.webhook.office.com/secret\n",
		"people:\n  - name: {x: " + annHash + "}\n",
	} {
		_, err := people.Parse([]byte(y), "people.yaml")
		if err == nil {
			t.Fatalf("%q parsed", y)
		}
		if strings.Contains(err.Error(), annHash) || strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q repeats a value", err)
		}
	}
}

func TestAnEmptyDirectoryIsOneOfNobody(t *testing.T) {
	t.Parallel()
	for _, y := range []string{"", "# nobody yet\n", "people: []\n", "people:\nroles:\n"} {
		d, err := people.Parse([]byte(y), "people.yaml")
		if err != nil || d == nil || d.Len() != 0 {
			t.Errorf("Parse(%q) = %v, %v; want a directory of nobody", y, d, err)
		}
	}
}

func TestHashTokenIsWhatTheDirectoryMatches(t *testing.T) {
	t.Parallel()
	a, b := people.NewToken(), people.NewToken()
	if a == b || len(a) != 43 {
		t.Fatalf("tokens %q, %q: want two different 43-character tokens", a, b)
	}
	d, err := people.New("test", []people.Person{{Name: "ann", TokenSHA256: people.HashToken(a)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.ByToken(a); !ok || p.Name != "ann" || okOf(d.ByToken(b)) {
		t.Fatalf("ann's token finds %+v, %v; another finds someone: %v", p, ok, okOf(d.ByToken(b)))
	}
}

func TestMergeJoinsPeopleByNameAndRefusesConflicts(t *testing.T) {
	t.Parallel()
	auth, err := people.New("callers.yaml", []people.Person{{Name: "ann", Roles: []string{"supervisor"}, TokenSHA256: annHash}, {Name: "bob", TokenSHA256: bobHash}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slack, err := people.New("slack.yaml", []people.Person{{Name: "ann", Roles: []string{"legal", "supervisor"}, Slack: "U1"}},
		[]people.Role{{Name: "supervisor", Slack: "C1"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := people.Merge("merged", nil, auth, slack)
	if err != nil {
		t.Fatal(err)
	}
	ann, ok := m.BySlack("U1")
	if !ok || ann.Name != "ann" || ann.TokenSHA256 != annHash || strings.Join(ann.Roles, ",") != "supervisor,legal" || m.Len() != 2 {
		t.Fatalf("merged ann = %+v (%d people)", ann, m.Len())
	}
	if r, _ := m.Role("supervisor"); r.Slack != "C1" {
		t.Errorf("merged role = %+v", r)
	}
	again, err := people.Parse(m.Source(), "again")
	if err != nil || again.Len() != 2 {
		t.Fatalf("the merged source does not parse again: %v", err)
	}
	if d, err := people.Merge("none", nil, nil); d != nil || err != nil {
		t.Errorf("merging nothing = %v, %v; want no directory", d, err)
	}

	other, _ := people.New("people.yaml", []people.Person{{Name: "ann", TokenSHA256: bobHash}}, nil)
	if _, err := people.Merge("merged", other, auth); err == nil || !strings.Contains(err.Error(), "person ann has one tokenSha256 in people.yaml and another in callers.yaml") || strings.Contains(err.Error(), annHash) {
		t.Errorf("two hashes for ann: %v", err)
	}
	shared, _ := people.New("people.yaml", []people.Person{{Name: "carol", TokenSHA256: annHash}}, nil)
	if _, err := people.Merge("merged", shared, auth); err == nil || !strings.Contains(err.Error(), "tokenSha256 is also carol's") {
		t.Errorf("one hash for two people: %v", err)
	}
	channel, _ := people.New("people.yaml", nil, []people.Role{{Name: "supervisor", Slack: "C2"}})
	if _, err := people.Merge("merged", channel, slack); err == nil || !strings.Contains(err.Error(), "role supervisor has one slack in people.yaml and another in slack.yaml") {
		t.Errorf("two channels for a role: %v", err)
	}
}
