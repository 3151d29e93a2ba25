package gate_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/interlockhq/interlock/gate"
)

// FuzzParse parses arbitrary bytes: it must never panic, every error must
// be a *gate.Error naming the source, and a rule set that parses must parse
// again from its Source and answer requests without panicking. Seeds live
// in testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	f.Add([]byte("rules: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := gate.Parse(data, "fuzz.yaml")
		if err != nil {
			var pe *gate.Error
			if !errors.As(err, &pe) || pe.Source != "fuzz.yaml" || !strings.HasPrefix(err.Error(), "gate rules fuzz.yaml: ") {
				t.Fatalf("error %q is not a *gate.Error naming the source", err)
			}
			return
		}
		again, err := gate.Parse(rs.Source(), "again")
		if err != nil {
			t.Fatalf("the source of a parsed rule set does not parse again: %v", err)
		}
		if len(again.Rules()) != len(rs.Rules()) {
			t.Fatalf("%d rules, then %d", len(rs.Rules()), len(again.Rules()))
		}
		for _, r := range rs.Rules() {
			if r.Name == "" || r.Tool == "" || r.Reason == "" || r.ApproverRole == "" || (r.Timeout == 0) != (r.OnTimeout == "") {
				t.Fatalf("rule %+v is incomplete", r)
			}
			for _, args := range []map[string]any{nil, {"amount": 600.0, "value": "x", "items": []any{1.0, "a"}}} {
				title, desc := r.Card(gate.Request{Tool: r.Tool, Args: args, Context: args})
				if strings.ContainsAny(title, "\r\n") || len(title) > gate.MaxTitle || len(desc) > gate.MaxDescription || !utf8.ValidString(title+desc) {
					t.Fatalf("rule %s filled a title of %d bytes %q and a description of %d bytes", r.Name, len(title), title, len(desc))
				}
				m := rs.Match(t.Context(), gate.Request{Tool: r.Tool, Args: args, Context: args})
				if m.Rule == nil && r.When == "" {
					t.Fatalf("rule %s without when did not fire", r.Name)
				}
				if m.Err != nil && m.Rule == nil {
					t.Fatalf("an error without a rule: %v", m.Err)
				}
			}
		}
	})
}
