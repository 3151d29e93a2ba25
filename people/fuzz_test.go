package people_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/people"
)

// FuzzParse parses arbitrary bytes: it must never panic, every error must
// name the source, and a directory that parses must parse again from its
// Source, and its merge with itself must be it again. Seeds live in
// testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := people.Parse(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "people: fuzz.yaml") {
				t.Fatalf("error %q does not name the source", err)
			}
			return
		}
		again, err := people.Parse(d.Source(), "again")
		if err != nil || again.Len() != d.Len() {
			t.Fatalf("the source of a parsed directory does not parse again: %v", err)
		}
		for _, p := range d.People() {
			if q, ok := d.Person(p.Name); !ok || q.Name != p.Name {
				t.Fatalf("%s is not found by name", p.Name)
			}
			if p.Slack != "" && !okOf(d.BySlack(p.Slack)) || p.Email != "" && !okOf(d.ByEmail(p.Email)) {
				t.Fatalf("%s is not found by a handle", p.Name)
			}
		}
		m, err := people.Merge("self", d, again)
		if err != nil || m.Len() != d.Len() {
			t.Fatalf("merging a directory with itself: %v", err)
		}
	})
}
