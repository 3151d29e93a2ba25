package people_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/people"
)

func TestAnAddressIsFoundByItsChannelsName(t *testing.T) {
	t.Parallel()
	d, err := people.Parse([]byte(`people:
  - name: ann
    roles: [finance]
    email: ann@example.com
    addresses: {pager: "+15550100", slack: U012AB3CD}
roles:
  - name: finance
    addresses: {pager: "+15550199", mail: finance@example.com}
`), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ann, _ := d.Person("ann")
	for ch, want := range map[string]string{"mail": "ann@example.com", "slack": "U012AB3CD", "pager": "+15550100", "teams": "", "webpush": ""} {
		if got := ann.Address(ch); got != want {
			t.Errorf("ann's %s address = %q, want %q", ch, got, want)
		}
	}
	if ann.Slack != "U012AB3CD" {
		t.Errorf("addresses.slack is not ann's Slack user: %q", ann.Slack)
	}
	if p, ok := d.BySlack("U012AB3CD"); !ok || p.Name != "ann" {
		t.Errorf("ann is not found by the Slack user given under addresses")
	}
	role, _ := d.Role("finance")
	if role.Address("pager") != "+15550199" || role.Address("mail") != "finance@example.com" || role.Email != "finance@example.com" {
		t.Errorf("finance's addresses = %+v", role)
	}
	// A copy handed out is the caller's to change.
	ann.Addresses["pager"] = "changed"
	if again, _ := d.Person("ann"); again.Address("pager") != "+15550100" {
		t.Error("changing a returned person's addresses changed the directory")
	}
}

func TestAnAddressThatIsWrongIsRefusedSayingWhere(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, yaml, want string }{
		{"two mail addresses", "people:\n  - name: ann\n    email: ann@example.com\n    addresses: {mail: other@example.com}\n", "addresses.mail and email give two addresses"},
		{"a channel name with a dot", "people:\n  - name: ann\n    addresses: {a.b: x}\n", `channel "a.b"`},
		{"an empty address", "people:\n  - name: ann\n    addresses: {pager: \"\"}\n", "the pager address must be 1 to"},
		{"a control character", "people:\n  - name: ann\n    addresses: {pager: \"a\\nb\"}\n", "without control characters"},
		{"a mail address that is none", "people:\n  - name: ann\n    addresses: {mail: not-an-address}\n", "is not an address"},
		{"a role's bad channel", "people: []\nroles:\n  - name: finance\n    addresses: {\"*\": x}\n", "role 1 (finance): addresses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := people.Parse([]byte(c.yaml), "people.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestMergeJoinsAddressesAndRefusesTwoForOneChannel(t *testing.T) {
	t.Parallel()
	a, err := people.Parse([]byte("people:\n  - name: ann\n    addresses: {pager: \"1\"}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := people.Parse([]byte("people:\n  - name: ann\n    addresses: {sms: \"2\"}\n"), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := people.Merge("both", a, b)
	if err != nil {
		t.Fatal(err)
	}
	if ann, _ := m.Person("ann"); ann.Address("pager") != "1" || ann.Address("sms") != "2" {
		t.Fatalf("merged addresses = %v", ann.Addresses)
	}
	c, err := people.Parse([]byte("people:\n  - name: ann\n    addresses: {pager: \"3\"}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := people.Merge("clash", a, c); err == nil || !strings.Contains(err.Error(), "one pager address in a.yaml and another in c.yaml") {
		t.Fatalf("Merge of two pager addresses: %v", err)
	}
}
