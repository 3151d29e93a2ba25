package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/gate"
)

func mustParse(t testing.TB, src string) *gate.RuleSet {
	t.Helper()
	rs, err := gate.Parse([]byte(src), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// args decodes JSON as an agent service does: numbers are float64.
func args(t testing.TB, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// argsNumber decodes JSON with UseNumber: numbers are json.Number.
func argsNumber(t testing.TB, js string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// when returns a rule set of one rule for tool t with when w.
func when(t testing.TB, w string) *gate.RuleSet {
	t.Helper()
	return mustParse(t, "rules:\n  - name: r\n    tool: t\n    when: '"+strings.ReplaceAll(w, "'", "''")+"'\n    reason: r\n    approverRole: a\n")
}

// Numbers compare across int and double, however the rule writes them
// and however the arguments were decoded.
func TestMatchNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		when string
		args map[string]any
		want bool // the rule fires
	}{
		{"args.amount > 500", map[string]any{"amount": 600}, true},
		{"args.amount > 500", map[string]any{"amount": int64(500)}, false},
		{"args.amount > 500", map[string]any{"amount": 500.5}, true},
		{"args.amount > 500", map[string]any{"amount": 500.0}, false},
		{"args.amount > 500", map[string]any{"amount": uint(501)}, true},
		{"args.amount > 500", args(t, `{"amount": 4800}`), true},
		{"args.amount > 500", args(t, `{"amount": 200}`), false},
		{"args.amount > 500", args(t, `{"amount": 500.01}`), true},
		{"args.amount > 500", argsNumber(t, `{"amount": 4800}`), true},
		{"args.amount > 500", argsNumber(t, `{"amount": 499.99}`), false},
		{"args.amount > 500.0", map[string]any{"amount": 600}, true},
		{"args.amount > 500.0", args(t, `{"amount": 4800}`), true},
		{"args.amount > 500.0", args(t, `{"amount": 200}`), false},
		{"args.amount >= 500", args(t, `{"amount": 500}`), true},
		{"args.amount == 500", args(t, `{"amount": 500}`), true},
		{"args.amount == 500", map[string]any{"amount": 500.0}, true},
		{"args.amount != 500", args(t, `{"amount": 500}`), false},
		{"args.amount in [100, 500]", args(t, `{"amount": 500}`), true},
		{"args.order.total > 1000", args(t, `{"order": {"total": 1500.5}}`), true},
		{"args.items.exists(i, i.price > 100)", args(t, `{"items": [{"price": 10}, {"price": 150}]}`), true},
		{"size(args.items) > 1", args(t, `{"items": [1, 2]}`), true},
		{"args.amount > 500 && args.currency == 'USD'", args(t, `{"amount": 501, "currency": "USD"}`), true},
		{"args.amount > 500 && args.currency == 'USD'", args(t, `{"amount": 501, "currency": "EUR"}`), false},
	}
	for _, tt := range tests {
		rs := when(t, tt.when)
		m := rs.Match(t.Context(), gate.Request{Tool: "t", Args: tt.args})
		if m.Err != nil {
			t.Errorf("%s with %v: %v", tt.when, tt.args, m.Err)
			continue
		}
		if got := m.Rule != nil; got != tt.want {
			t.Errorf("%s with %v (%T): fired = %v, want %v", tt.when, tt.args, tt.args["amount"], got, tt.want)
		}
	}
}

// Every field of the request is a variable.
func TestMatchVariables(t *testing.T) {
	t.Parallel()
	req := gate.Request{
		CallID: "c-1", Tool: "t", ConversationID: "conv-9", Agent: "support-bot",
		Args:    map[string]any{"amount": 1},
		Context: map[string]any{"tier": "gold", "region": map[string]any{"eu": true}},
	}
	for _, w := range []string{
		"tool == 't'",
		"agent == 'support-bot'",
		"conversationId.startsWith('conv-')",
		"context.tier == 'gold'",
		"context.region.eu == true",
		"has(args.amount) && !has(args.note)",
		"'amount' in args",
	} {
		if m := when(t, w).Match(t.Context(), req); m.Rule == nil || m.Err != nil {
			t.Errorf("%s: %+v", w, m)
		}
	}
	// A request without args or context has empty maps.
	for _, w := range []string{"size(args) == 0", "!has(context.tier)"} {
		if m := when(t, w).Match(t.Context(), gate.Request{Tool: "t"}); m.Rule == nil || m.Err != nil {
			t.Errorf("%s on an empty request: %+v", w, m)
		}
	}
}

// A rule whose when fails at run time fires, with the failure in Err.
func TestMatchFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		when    string
		args    map[string]any
		wantErr []string
	}{
		{"missing key", "args.amount > 500", map[string]any{"note": "x"}, []string{
			"gate rules rules.yaml: rule 1 (r): when failed, so the rule fires and the call waits for approval: no such key: amount",
			"guard optional arguments with has(), e.g. has(args.amount) && args.amount > 500",
		}},
		{"no args at all", "args.amount > 500", nil, []string{"no such key: amount"}},
		{"wrong type", "args.amount > 500", map[string]any{"amount": "600"}, []string{"no such overload", "an argument has another type than the rule expects"}},
		{"not a bool", "args.flag == true || args.flag", map[string]any{"flag": "yes"}, []string{"no such overload"}},
		{"division by zero", "10 / args.n > 1", map[string]any{"n": 0}, []string{"division by zero", "fix the rule's when"}},
	}
	for _, tt := range tests {
		m := when(t, tt.when).Match(t.Context(), gate.Request{Tool: "t", Args: tt.args})
		if m.Rule == nil || m.Rule.Name != "r" {
			t.Errorf("%s: rule did not fire: %+v", tt.name, m)
		}
		if m.Allowed() {
			t.Errorf("%s: Allowed", tt.name)
		}
		if m.Err == nil {
			t.Errorf("%s: no Err", tt.name)
			continue
		}
		for _, want := range tt.wantErr {
			if !strings.Contains(m.Err.Error(), want) {
				t.Errorf("%s: Err\n  %v\ndoes not contain\n  %s", tt.name, m.Err, want)
			}
		}
		var ee *gate.EvalError
		if !errors.As(m.Err, &ee) || ee.Rule != 1 || ee.Name != "r" || ee.Source != "rules.yaml" {
			t.Errorf("%s: Err %#v is not an *EvalError for rule 1 (r)", tt.name, m.Err)
		}
	}
}

// A when that would run for long stops at the cost limit, and the rule
// fires.
func TestMatchCostLimit(t *testing.T) {
	t.Parallel()
	// 10^6 iterations of nested comprehensions.
	ten := "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
	w := ten + ".all(a, " + ten + ".all(b, " + ten + ".all(c, " + ten + ".all(d, " + ten + ".all(e, " + ten + ".all(f, a + b + c + d + e + f >= 0))))))"
	m := when(t, w).Match(t.Context(), gate.Request{Tool: "t"})
	if m.Rule == nil || m.Err == nil || !strings.Contains(m.Err.Error(), "cost limit exceeded") {
		t.Fatalf("Match = %+v, want the rule to fire with a cost limit error", m)
	}
	if !strings.Contains(m.Err.Error(), "costs more than 1000000") {
		t.Errorf("Err %v does not say what to do", m.Err)
	}
	// Arguments that are large make a simple macro costly too.
	big := make([]any, 2_000_000)
	for i := range big {
		big[i] = 1
	}
	m = when(t, "args.items.exists(i, i > 1)").Match(t.Context(), gate.Request{Tool: "t", Args: map[string]any{"items": big}})
	if m.Rule == nil || m.Err == nil || !strings.Contains(m.Err.Error(), "cost limit exceeded") {
		t.Fatalf("Match over a large list = %+v, want a cost limit error", m)
	}
}

// An ended ctx stops the evaluation, and the rule fires.
func TestMatchContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m := when(t, "args.amount > 500").Match(ctx, gate.Request{Tool: "t", Args: map[string]any{"amount": 1}})
	if m.Rule == nil || !errors.Is(m.Err, context.Canceled) {
		t.Fatalf("Match = %+v, want the rule to fire with context.Canceled", m)
	}
	if !strings.Contains(m.Err.Error(), "the caller's context ended") {
		t.Errorf("Err = %v", m.Err)
	}
	// A rule without when needs no evaluation.
	rs := mustParse(t, "rules:\n"+rule("t"))
	if m := rs.Match(ctx, gate.Request{Tool: "t"}); m.Rule == nil || m.Err != nil {
		t.Errorf("Match without when = %+v", m)
	}
}

// The first rule in file order whose tool matches and whose when holds
// fires.
func TestMatchOrder(t *testing.T) {
	t.Parallel()
	rs := mustParse(t, `rules:
  - name: huge-refund
    tool: issue_refund
    when: args.amount > 10000
    reason: r
    approverRole: cfo
  - name: other-tool
    tool: send_contract
    reason: r
    approverRole: legal
  - name: vip-refund
    tool: issue_refund
    when: context.tier == "vip"
    reason: r
    approverRole: account_manager
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    reason: r
    approverRole: supervisor
  - name: every-refund
    tool: issue_refund
    reason: r
    approverRole: agent_lead
  - name: never-reached
    tool: issue_refund
    when: args.amount > 0
    reason: r
    approverRole: nobody
`)
	tests := []struct {
		args    string
		context map[string]any
		want    string
	}{
		{`{"amount": 20000}`, map[string]any{"tier": "vip"}, "huge-refund"},
		{`{"amount": 600}`, map[string]any{"tier": "vip"}, "vip-refund"},
		{`{"amount": 600}`, map[string]any{"tier": "basic"}, "large-refund"},
		{`{"amount": 5}`, map[string]any{"tier": "basic"}, "every-refund"},
	}
	for _, tt := range tests {
		m := rs.Match(t.Context(), gate.Request{Tool: "issue_refund", Args: args(t, tt.args), Context: tt.context})
		if m.Err != nil || m.Rule == nil || m.Rule.Name != tt.want {
			t.Errorf("%s %v: Match = %+v, want rule %s", tt.args, tt.context, m, tt.want)
		}
	}
	// A failing rule stops the search: later rules are not evaluated.
	m := rs.Match(t.Context(), gate.Request{Tool: "issue_refund", Args: map[string]any{}})
	if m.Rule == nil || m.Rule.Name != "huge-refund" || m.Err == nil {
		t.Errorf("Match without amount = %+v, want huge-refund to fire with an error", m)
	}
	for _, tool := range []string{"lookup_order", "Issue_Refund", ""} {
		if m := rs.Match(t.Context(), gate.Request{Tool: tool}); !m.Allowed() || m.Err != nil {
			t.Errorf("tool %q: Match = %+v, want allowed", tool, m)
		}
	}
	var none *gate.RuleSet
	if m := none.Match(t.Context(), gate.Request{Tool: "issue_refund"}); !m.Allowed() {
		t.Errorf("nil rule set: Match = %+v", m)
	}
}

// A rule set is safe for concurrent use.
func TestMatchConcurrent(t *testing.T) {
	t.Parallel()
	rs := when(t, "args.amount > 500")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				amount := float64(i*100 + j)
				m := rs.Match(t.Context(), gate.Request{Tool: "t", Args: map[string]any{"amount": amount}})
				if (m.Rule != nil) != (amount > 500) || m.Err != nil {
					t.Errorf("amount %v: %+v", amount, m)
				}
			}
		})
	}
	wg.Wait()
}

// The rules of examples/gate/rules.yaml do what the file says.
func TestExampleRules(t *testing.T) {
	t.Parallel()
	data := readFile(t, "../examples/gate/rules.yaml")
	rs, err := gate.Parse(data, "examples/gate/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rs.Rules()); n != 3 {
		t.Fatalf("%d rules, want 3", n)
	}
	tests := []struct {
		tool string
		args string
		want string // approver role; "" for allowed
	}{
		{"issue_refund", `{"amount": 4800, "orderId": "o-1"}`, "supervisor"},
		{"issue_refund", `{"amount": 200, "orderId": "o-1"}`, ""},
		{"issue_refund", `{"amount": 500}`, ""},
		{"issue_refund", `{"amount": 500.01}`, "supervisor"},
		{"cancel_subscription", `{"subscriptionId": "s-1"}`, "retention_lead"},
		{"cancel_subscription", `{}`, "retention_lead"},
		{"send_contract", `{"value": 20000}`, "legal"},
		{"send_contract", `{"value": 5000}`, ""},
		{"lookup_order", `{"orderId": "o-1"}`, ""},
	}
	for _, tt := range tests {
		m := rs.Match(t.Context(), gate.Request{CallID: "c-1", Tool: tt.tool, Args: args(t, tt.args)})
		if m.Err != nil {
			t.Errorf("%s %s: %v", tt.tool, tt.args, m.Err)
			continue
		}
		got := ""
		if m.Rule != nil {
			got = m.Rule.ApproverRole
		}
		if got != tt.want {
			t.Errorf("%s %s: approver %q, want %q", tt.tool, tt.args, got, tt.want)
		}
	}
	for _, r := range rs.Rules() {
		if r.Name == r.Tool+"#"+string(rune('0'+r.Index)) || r.Reason == "" || r.Timeout == 0 || r.OnTimeout != gate.Expire {
			t.Errorf("rule %+v: want a name, a reason and a timeout that expires", r)
		}
	}
	if !bytes.Equal(rs.Source(), data) {
		t.Error("Source differs from the file")
	}
}

// TestARuleNamingAServerHoldsOnlyThatServersTool checks server matching: a
// rule without server holds the tool of any server (so that a tool renamed
// or shadowed by another server's stays held), one with a server only that
// server's.
func TestARuleNamingAServerHoldsOnlyThatServersTool(t *testing.T) {
	t.Parallel()
	rs := mustParse(t, `rules:
  - name: pay-refund
    tool: issue_refund
    server: pay
    reason: r
    approverRole: a
  - name: any-transfer
    tool: transfer
    reason: r
    approverRole: a
`)
	ctx := context.Background()
	for _, c := range []struct {
		tool, server string
		want         string
	}{
		{"issue_refund", "pay", "pay-refund"},
		{"issue_refund", "other", ""},
		{"issue_refund", "", ""},
		{"transfer", "pay", "any-transfer"},
		{"transfer", "evil", "any-transfer"},
		{"transfer", "", "any-transfer"},
	} {
		m := rs.Match(ctx, gate.Request{Tool: c.tool, Server: c.server})
		got := ""
		if m.Rule != nil {
			got = m.Rule.Name
		}
		if got != c.want {
			t.Errorf("%s of %q: rule %q, want %q", c.tool, c.server, got, c.want)
		}
	}
	// server is a variable of when.
	if m := when(t, `server == "pay"`).Match(ctx, gate.Request{Tool: "t", Server: "pay"}); m.Rule == nil {
		t.Error("when: server == \"pay\" did not hold for a request of pay")
	}
}

// TestAnEditStaysWithinTheRuleThatHoldsTheCall checks CheckEdit: a rule's
// editWhen bounds the edit against the requested args, and an edit that
// another rule would hold, or that no rule set any longer has a rule for,
// is refused.
func TestAnEditStaysWithinTheRuleThatHoldsTheCall(t *testing.T) {
	t.Parallel()
	rs := mustParse(t, `rules:
  - name: huge-refund
    tool: issue_refund
    when: args.amount > 10000
    reason: r
    approverRole: cfo
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    editWhen: args.amount <= requested.amount && args.orderId == requested.orderId
    reason: r
    approverRole: supervisor
  - name: any-contract
    tool: send_contract
    reason: r
    approverRole: legal
`)
	ctx := context.Background()
	req := gate.Request{Tool: "issue_refund", Args: args(t, `{"amount": 4800, "orderId": "o-1"}`)}
	for _, c := range []struct {
		name, rule, final, wantErr string
	}{
		{"lowered", "large-refund", `{"amount": 400, "orderId": "o-1"}`, ""},
		{"lowered below the rule", "large-refund", `{"amount": 100, "orderId": "o-1"}`, ""},
		{"raised", "large-refund", `{"amount": 9000, "orderId": "o-1"}`, "allows an edit only where args.amount <= requested.amount"},
		{"another order", "large-refund", `{"amount": 400, "orderId": "o-2"}`, "allows an edit only where"},
		{"a missing argument", "large-refund", `{"orderId": "o-1"}`, "failed on these args"},
		{"into another rule", "huge-refund", `{"amount": 20000, "orderId": "o-1"}`, ""},
		{"gone", "no-such-rule", `{"amount": 400, "orderId": "o-1"}`, "no longer in the gate's rules"},
	} {
		err := rs.CheckEdit(ctx, c.rule, req, args(t, c.final))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want allowed", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
		}
	}
	// A huge-refund approval edited down into large-refund's range would
	// need another approval: refused.
	huge := gate.Request{Tool: "issue_refund", Args: args(t, `{"amount": 20000, "orderId": "o-1"}`)}
	if err := rs.CheckEdit(ctx, "huge-refund", huge, args(t, `{"amount": 4800, "orderId": "o-1"}`)); err == nil || !strings.Contains(err.Error(), "would be held by rule large-refund (for supervisor)") {
		t.Errorf("an edit into another rule: %v", err)
	}
	var nilSet *gate.RuleSet
	if err := nilSet.CheckEdit(ctx, "large-refund", req, args(t, `{"amount": 400}`)); err == nil {
		t.Error("no rule set allowed an edit")
	}
}

// TestTheExampleRulesBoundAnEditAsTheirTextSays checks
// examples/gate/rules.yaml: "You may lower the amount".
func TestTheExampleRulesBoundAnEditAsTheirTextSays(t *testing.T) {
	t.Parallel()
	rs, err := gate.Parse(readFile(t, "../examples/gate/rules.yaml"), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := gate.Request{Tool: "issue_refund", Args: args(t, `{"amount": 4800, "currency": "USD", "orderId": "o-1042"}`)}
	if m := rs.Match(ctx, req); m.Rule == nil || m.Rule.Name != "large-refund" {
		t.Fatalf("a refund of 4800 is held by %+v, want large-refund", m.Rule)
	}
	if err := rs.CheckEdit(ctx, "large-refund", req, args(t, `{"amount": 9000, "currency": "USD", "orderId": "o-1042"}`)); err == nil {
		t.Error("the example rules let a supervisor raise a refund from 4800 to 9000")
	}
	if err := rs.CheckEdit(ctx, "large-refund", req, args(t, `{"amount": 400, "currency": "USD", "orderId": "o-1042"}`)); err != nil {
		t.Errorf("lowering the refund: %v", err)
	}
	if err := rs.CheckEdit(ctx, "large-refund", req, args(t, `{"amount": 400, "currency": "GBP", "orderId": "o-1042"}`)); err == nil {
		t.Error("the example rules let a supervisor change the refund's currency")
	}
	noCurrency := gate.Request{Tool: "issue_refund", Args: args(t, `{"amount": 4800, "orderId": "o-1042"}`)}
	if err := rs.CheckEdit(ctx, "large-refund", noCurrency, args(t, `{"amount": 400, "orderId": "o-1042"}`)); err != nil {
		t.Errorf("lowering a refund asked without a currency: %v", err)
	}
}

// TestATitleSaysAnAmountAsTheCardShowsIt: an argument the rule's
// argsSchema gives a display fills a placeholder as the approval's card
// shows it ($4,800.00), not as the raw number; one without stays as it is.
func TestATitleSaysAnAmountAsTheCardShowsIt(t *testing.T) {
	rs, err := gate.Parse([]byte(`rules:
  - name: refunds
    tool: issue_refund
    reason: r
    approverRole: a
    title: Refund {{args.amount}} on order {{args.orderId}} ({{args.count}} items)
    description: Refund **{{args.amount}}**.
    argsSchema:
      type: object
      properties:
        amount: {type: number, x-interlock-display: currency}
        currency: {type: string}
        orderId: {type: string}
        count: {type: integer}
`), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := rs.Rules()[0]
	title, desc := r.Card(gate.Request{Tool: "issue_refund", Args: map[string]any{"amount": 4800.0, "currency": "USD", "orderId": "o-1", "count": 3.0}})
	if title != "Refund $4,800.00 on order o-1 (3 items)" || desc != "Refund **$4,800.00**." {
		t.Errorf("card = %q / %q", title, desc)
	}
}
