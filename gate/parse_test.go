package gate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/gate"
)

// rule is a valid rule for tool t, to build test rule sets around.
func rule(t string) string {
	return "  - tool: " + t + "\n    reason: r\n    approverRole: a\n"
}

// named is a valid rule named name for tool t.
func named(name, t string) string {
	return "  - name: " + name + "\n    tool: " + t + "\n    reason: r\n    approverRole: a\n"
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2001)
	deep := "    timeout: 1h\n    onTimeout: escalate\n    escalate:"
	for range 11 {
		deep += " {approverRole: b, timeout: 1h, onTimeout: escalate, escalate:"
	}
	deep += " {approverRole: c, timeout: 1h}" + strings.Repeat("}", 11) + "\n"
	many := "rules:\n" + strings.Repeat(rule("t"), gate.MaxRules+1)

	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings of the error
	}{
		{"empty", "", []string{"gate rules rules.yaml: the rule set is empty", "rules: []"}},
		{"only a comment", "# nothing yet\n", []string{"the rule set is empty"}},
		{"rules null", "rules:\n", []string{"line 1: rules: is missing", "rules: []"}},
		{"no rules key", "{}\n", []string{"rules: is missing"}},
		{"top level list", "- tool: a\n", []string{"line 1: the rule set must be a mapping with a rules list", "found a list"}},
		{"unknown top field", "rules: []\nversion: 2\n", []string{"line 2: unknown field \"version\"; the fields here are rules"}},
		{"rules a mapping", "rules: {tool: a}\n", []string{"rules: must be a list of rules", "found a mapping"}},
		{"rule not a mapping", "rules: [issue_refund]\n", []string{"line 1: rule 1: must be a mapping of fields", `not the value "issue_refund"`}},
		{"too many rules", many, []string{"has 1001 rules, more than 1000"}},
		{"too big", "rules: []\n#" + strings.Repeat("x", gate.MaxSourceSize), []string{"more than the 1048576 a KV value holds"}},
		{"tool missing", "rules:\n  - reason: r\n    approverRole: a\n", []string{"line 2: rule 1: tool: is missing", "tool: issue_refund"}},
		{"tool with a space", "rules:\n  - tool: issue refund\n    reason: r\n    approverRole: a\n", []string{`line 2: rule 1 (issue refund#1): tool: "issue refund" is not a tool name`}},
		{"tool a list", "rules:\n  - tool: [a, b]\n    reason: r\n    approverRole: a\n", []string{"tool: must be text, not a list"}},
		{"reason missing", "rules:\n  - tool: t\n    approverRole: a\n", []string{"rule 1 (t#1): reason: is missing", "for the approver to read"}},
		{"reason too long", "rules:\n  - tool: t\n    approverRole: a\n    reason: " + long + "\n", []string{"reason: is 2001 characters, more than 2000"}},
		{"role missing", "rules:\n  - tool: t\n    reason: r\n", []string{"rule 1 (t#1): approverRole: is missing", "approverRole: supervisor"}},
		{"role with a space", "rules:\n  - tool: t\n    reason: r\n    approverRole: head of legal\n", []string{`line 4: rule 1 (t#1): approverRole: "head of legal" is not a role name`, "letters, digits, _ or -"}},
		{"role too long", "rules:\n  - tool: t\n    reason: r\n    approverRole: " + strings.Repeat("a", 129) + "\n", []string{"is not a role name"}},
		{"misspelt field", "rules:\n  - name: big\n    tool: t\n    reason: r\n    approverrole: a\n", []string{`line 5: rule 1 (big): unknown field "approverrole"; did you mean "approverRole"? Field names are case-sensitive`}},
		{"snake case field", "rules:\n  - tool: t\n    reason: r\n    approver_role: a\n", []string{`did you mean "approverRole"`}},
		{"unknown field", "rules:\n  - tool: t\n    reason: r\n    approverRole: a\n    priority: high\n", []string{`line 5: rule 1 (t#1): unknown field "priority"; the fields here are name, tool, server, when, editWhen, reason, approverRole, timeout, onTimeout, escalate`}},
		{"field twice", "rules:\n  - tool: t\n    tool: u\n    reason: r\n    approverRole: a\n", []string{"line 3: rule 1 (t#1): tool: is set twice; keep one"}},
		{"name too long", "rules:\n  - name: " + strings.Repeat("n", 129) + "\n    tool: t\n    reason: r\n    approverRole: a\n", []string{"name: must be at most 128 characters"}},
		{"same name twice", "rules:\n" + named("big", "t") + named("big", "u"), []string{`line 6: rule 2 (big): name: "big" is already the name of rule 1; give each rule its own name`}},
		{"name clashes with a default", "rules:\n" + named("t#2", "u") + rule("t"), []string{`rule 2 (t#2): name: "t#2" is already the name of rule 1`}},
		{"timeout without unit", "rules:\n" + rule("t") + "    timeout: 30\n", []string{`line 5: rule 1 (t#1): timeout: "30" has no unit; write a duration such as 30m`}},
		{"timeout in days", "rules:\n" + rule("t") + "    timeout: 2d\n", []string{"days are not a unit; write hours, e.g. 48h"}},
		{"timeout not a duration", "rules:\n" + rule("t") + "    timeout: soon\n", []string{`timeout: "soon" is not a duration`}},
		{"timeout negative", "rules:\n" + rule("t") + "    timeout: -5m\n", []string{"timeout: -5m is negative; give a positive duration"}},
		{"timeout zero", "rules:\n" + rule("t") + "    timeout: 0s\n", []string{"timeout: 0s is zero; leave timeout out for no deadline"}},
		{"timeout under a second", "rules:\n" + rule("t") + "    timeout: 500ms\n", []string{"less than a second"}},
		{"timeout a mapping", "rules:\n" + rule("t") + "    timeout: {minutes: 5}\n", []string{"timeout: must be text, not a mapping"}},
		{"onTimeout without timeout", "rules:\n" + rule("t") + "    onTimeout: reject\n", []string{"line 5: rule 1 (t#1): onTimeout: is set but there is no timeout; add one"}},
		{"onTimeout unknown", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: later\n", []string{`onTimeout: "later" is not an action; use expire (the default), reject, approve or escalate`}},
		{"onTimeout capitalised", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: Reject\n", []string{`onTimeout: "Reject" must be written in lower case: reject`}},
		{"escalate without a step", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n", []string{"line 6: rule 1 (t#1): escalate: is missing; onTimeout: escalate needs"}},
		{"step without escalate", "rules:\n" + rule("t") + "    timeout: 1h\n    escalate: {approverRole: b, timeout: 1h}\n", []string{"line 6: rule 1 (t#1): escalate: is set but onTimeout is expire; set `onTimeout: escalate`"}},
		{"step without timeout", "rules:\n" + rule("t") + "    escalate: {approverRole: b, timeout: 1h}\n", []string{"escalate: is set but there is no timeout"}},
		{"step not a mapping", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n    escalate: legal\n", []string{`escalate: must be a mapping such as`}},
		{"step role missing", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n    escalate: {timeout: 1h}\n", []string{"line 7: rule 1 (t#1): escalate.approverRole: is missing"}},
		{"step timeout missing", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n    escalate: {approverRole: b}\n", []string{"line 7: rule 1 (t#1): escalate.timeout: is missing; an escalation needs one"}},
		{"step unknown field", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n    escalate: {approverRole: b, timeout: 1h, reason: x}\n", []string{`escalate: unknown field "reason"; the fields here are approverRole, timeout, onTimeout, escalate`}},
		{"chained step bad", "rules:\n" + rule("t") + "    timeout: 1h\n    onTimeout: escalate\n    escalate:\n      approverRole: b\n      timeout: 1h\n      onTimeout: escalate\n      escalate: {approverRole: c, timeout: -1h}\n", []string{"line 11: rule 1 (t#1): escalate.escalate.timeout: -1h is negative"}},
		{"chain too long", "rules:\n" + rule("t") + deep, []string{"the escalation chain is more than 10 steps long"}},
		{"alias", "rules:\n  - &r\n    tool: t\n    reason: r\n    approverRole: a\n  - *r\n", []string{"line 6: rule 2: is a YAML alias (*r); write the rule out in full"}},
		{"alias cycle", "rules:\n  - tool: t\n    reason: &x [*x]\n    approverRole: a\n", []string{"reason: must be text, not a list"}},
		{"alias value", "rules:\n  - tool: t\n    reason: &why r\n    approverRole: *why\n", []string{"approverRole: is a YAML alias (*why)"}},
		{"two documents", "rules: []\n---\nrules: []\n", []string{"line 2: a second YAML document starts here"}},
		{"not YAML", "rules:\n  - tool: t\n   reason: r\n", []string{"the file is not valid YAML", "check the indentation"}},
		{"not YAML, no line", "rules: a: b\n", []string{"the file is not valid YAML: mapping values are not allowed"}},
		{"when undeclared", "rules:\n" + named("large-refund", "issue_refund") + "    when: arg.amount > 500\n", []string{
			"gate rules rules.yaml: line 6: rule 1 (large-refund): when: undeclared reference to 'arg' (did you mean 'args'?) (at 1:1); the variables are tool, server, args, agent, conversationId and context, and arguments are read as args.<name>",
		}},
		{"when syntax", "rules:\n" + rule("t") + "    when: args.amount >\n", []string{"rule 1 (t#1): when: Syntax error: ", "(at 1:14)"}},
		{"when position on line 2", "rules:\n" + rule("t") + "    when: |\n      has(args.amount) &&\n        argz.amount > 5\n", []string{"undeclared reference to 'argz' (did you mean 'args'?) (at 2:3)"}},
		{"when not a condition", "rules:\n" + rule("t") + "    when: args.amount\n", []string{"when: the expression is of type dyn, but when must be true or false"}},
		{"when an int", "rules:\n" + rule("t") + "    when: 1 + 2\n", []string{"is of type int"}},
		{"when types mismatch", "rules:\n" + rule("t") + "    when: tool > 5\n", []string{"found no matching overload for '_>_' applied to '(string, int)' (at 1:6)", "the operand types do not fit"}},
		{"when too long", "rules:\n" + rule("t") + "    when: " + strings.Repeat("true && ", 600) + "true\n", []string{"when: is 4804 characters, more than 4096"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs, err := gate.Parse([]byte(tt.yaml), "rules.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded with %d rules; want an error with %q", len(rs.Rules()), tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n  %v\ndoes not contain\n  %s", err, want)
				}
			}
			var pe *gate.Error
			if !errors.As(err, &pe) {
				t.Errorf("error %v is not a *gate.Error", err)
			}
		})
	}
}

// The *Error of a when expression says where the problem is.
func TestParseErrorFields(t *testing.T) {
	t.Parallel()
	src := "rules:\n" + rule("t") + "  - name: large-refund\n    tool: issue_refund\n    when: args.amount > 500 && agnt == 'x'\n    reason: r\n    approverRole: a\n"
	_, err := gate.Parse([]byte(src), "rules.yaml")
	var pe *gate.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *gate.Error", err)
	}
	want := gate.Error{Source: "rules.yaml", Line: 7, Rule: 2, Name: "large-refund", Field: "when"}
	got := *pe
	got.Msg = ""
	if got != want {
		t.Errorf("error fields = %+v, want %+v", got, want)
	}
	if !strings.HasPrefix(pe.Msg, "undeclared reference to 'agnt' (did you mean 'agent'?) (at 1:22)") {
		t.Errorf("Msg = %q", pe.Msg)
	}
}

// Every problem is reported, not only the first, up to a limit.
func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	src := "rules:\n  - tool: a\n    reason: r\n  - tool: b\n    approverRole: x\n    timeout: 5\n"
	_, err := gate.Parse([]byte(src), "rules.yaml")
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{"rule 1 (a#1): approverRole: is missing", "rule 2 (b#2): reason: is missing", `rule 2 (b#2): timeout: "5" has no unit`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}

	src = "rules:\n" + strings.Repeat("  - tool: t\n", 30)
	_, err = gate.Parse([]byte(src), "rules.yaml")
	if err == nil || !strings.Contains(err.Error(), "more problems not listed") {
		t.Errorf("error %v does not say more problems were left out", err)
	}
	if n := strings.Count(err.Error(), "\n"); n != 20 {
		t.Errorf("error has %d lines, want 21:\n%v", n+1, err)
	}
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	src := `rules:
  - tool: lookup_order
    reason: Always reviewed.
    approverRole: ops
  - name: big-contract
    tool: send_contract
    when: |
      has(args.value)
        && args.value > 10000
    reason: >
      Contracts above $10,000
      need legal review.
    approverRole: legal
    timeout: 24h
    onTimeout: escalate
    escalate:
      approverRole: general_counsel
      timeout: 12h
      onTimeout: escalate
      escalate: {approverRole: ceo, timeout: 1h30m, onTimeout: reject}
  - tool: close_account
    when: ""
    reason: r
    approverRole: a-b_C9
    timeout: 90s
`
	rs, err := gate.Parse([]byte(src), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Name() != "rules.yaml" || string(rs.Source()) != src {
		t.Errorf("Name, Source = %q, %q", rs.Name(), rs.Source())
	}
	rules := rs.Rules()
	if len(rules) != 3 {
		t.Fatalf("got %d rules", len(rules))
	}
	r := rules[0]
	if r.Name != "lookup_order#1" || r.Index != 1 || r.When != "" || r.Timeout != 0 || r.OnTimeout != "" || r.Escalate != nil {
		t.Errorf("rule 1 = %+v", r)
	}
	r = rules[1]
	if r.Name != "big-contract" || r.Index != 2 || r.When != "has(args.value)\n  && args.value > 10000" ||
		r.Reason != "Contracts above $10,000 need legal review." || r.Timeout != 24*time.Hour || r.OnTimeout != gate.Escalate {
		t.Errorf("rule 2 = %+v", r)
	}
	want := "general_counsel 12h0m0s escalate -> ceo 1h30m0s reject"
	if got := chain(r.Escalate); got != want {
		t.Errorf("rule 2 escalation = %s, want %s", got, want)
	}
	r = rules[2]
	if r.Name != "close_account#3" || r.When != "" || r.Timeout != 90*time.Second || r.OnTimeout != gate.Expire {
		t.Errorf("rule 3 = %+v", r)
	}

	// Rules returns a copy: changing it changes nothing in the set.
	rules[1].Escalate.ApproverRole = "intern"
	rules[1].Reason = "none"
	if again := rs.Rules()[1]; again.Escalate.ApproverRole != "general_counsel" || again.Reason == "none" {
		t.Errorf("the rule set changed through Rules: %+v", again)
	}
	src2 := rs.Source()
	src2[0] = 'X'
	if rs.Source()[0] != 'r' {
		t.Error("the rule set changed through Source")
	}
}

func chain(e *gate.Escalation) string {
	var s []string
	for ; e != nil; e = e.Escalate {
		s = append(s, fmt.Sprintf("%s %s %s", e.ApproverRole, e.Timeout, e.OnTimeout))
	}
	return strings.Join(s, " -> ")
}

// An empty list is a valid rule set that allows every call.
func TestParseEmptyList(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"rules: []\n", "# none yet\nrules: []\n", "---\nrules: []\n"} {
		rs, err := gate.Parse([]byte(src), "rules.yaml")
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if len(rs.Rules()) != 0 {
			t.Errorf("Parse(%q) has rules", src)
		}
		if m := rs.Match(t.Context(), gate.Request{Tool: "anything"}); !m.Allowed() {
			t.Errorf("Parse(%q): call not allowed: %+v", src, m)
		}
	}
}
