package people_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/people"
)

// TestFileEditsKeepOnlyHashesAndComments: add creates the file mode 0600
// and returns a token the file holds only the hash of; rotate-token
// changes it; remove revokes one person and keeps the others and the
// operator's comments.
func TestFileEditsKeepOnlyHashesAndComments(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "people.yaml")
	ann, err := people.AddPerson(file, people.Person{Name: "ann@example.com", Roles: []string{"supervisor"}, Email: "ann@example.com", Slack: "U1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := people.AddPerson(file, people.Person{Name: "bob", Teams: "bob@example.com"}, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), ann) || !strings.Contains(string(b), people.HashToken(ann)) || !strings.Contains(string(b), "# Interlock's directory of people") {
		t.Fatalf("the file holds the token, or not its hash, or no header:\n%s", b)
	}
	commented := strings.Replace(string(b), "  - name: bob\n", "  # bob reads only\n  - name: bob\n", 1)
	if err := os.WriteFile(file, []byte(commented), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := people.AddPerson(file, people.Person{Name: "bob"}, true); err == nil || !strings.Contains(err.Error(), `already has a person named "bob"`) || !strings.Contains(err.Error(), "rotate-token bob") {
		t.Fatalf("adding bob twice: %v", err)
	}
	if _, err := people.AddPerson(file, people.Person{Name: "carol", Slack: "U1"}, false); err == nil || !strings.Contains(err.Error(), "U1 is also ann@example.com's") {
		t.Fatalf("adding a second person with ann's Slack id: %v", err)
	}
	if _, err := people.AddPerson(file, people.Person{Name: "c d"}, false); err == nil || !strings.Contains(err.Error(), "use only") {
		t.Fatalf("adding a bad name: %v", err)
	}

	rotated, err := people.RotateToken(file, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bobToken, err := people.RotateToken(file, "bob")
	if err != nil {
		t.Fatal(err)
	}
	d, err := people.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if okOf(d.ByToken(ann)) || !okOf(d.ByToken(rotated)) || !okOf(d.ByToken(bobToken)) {
		t.Fatal("after rotate-token the old token works or a new one does not")
	}
	if _, err := people.RotateToken(file, "dave"); err == nil || !strings.Contains(err.Error(), `no person named "dave"; it has ann@example.com, bob`) {
		t.Fatalf("rotating an unknown person: %v", err)
	}

	if err := people.RemovePerson(file, "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	d, err = people.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if okOf(d.ByToken(rotated)) || !okOf(d.ByToken(bobToken)) || d.Len() != 1 {
		t.Fatal("remove revoked the wrong person")
	}
	b, _ = os.ReadFile(file)
	for _, want := range []string{"# Interlock's directory of people", "# bob reads only"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the file lost %q:\n%s", want, b)
		}
	}
	if err := people.RemovePerson(file, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := people.RemovePerson(file, "bob"); err == nil || !strings.Contains(err.Error(), "it has nobody") {
		t.Fatalf("removing from an empty file: %v", err)
	}
	if err := people.RemovePerson(filepath.Join(t.TempDir(), "none.yaml"), "bob"); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("removing from a missing file: %v", err)
	}
}

func TestAddPersonToAFileWithRolesOnlyKeepsTheRoles(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "people.yaml")
	if err := os.WriteFile(file, []byte("roles:\n  - name: supervisor\n    slack: C1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := people.AddPerson(file, people.Person{Name: "ann", Roles: []string{"supervisor"}}, false); err != nil {
		t.Fatal(err)
	}
	d, err := people.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := d.Role("supervisor"); r.Slack != "C1" || len(d.Holders("supervisor")) != 1 {
		t.Fatalf("role %+v, holders %v", r, d.Holders("supervisor"))
	}
}
