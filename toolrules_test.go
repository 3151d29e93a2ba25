package interlock

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/protocol"
)

// ruleHead is the start of a valid rule named big for tool t, to build
// rule sets around.
const ruleHead = "rules:\n  - name: big\n    tool: t\n    reason: r\n    approverRole: a\n"

// fire loads yaml as the gate's rules and returns what the rule that
// fires for a call of tool t with args asks.
func fire(t *testing.T, yaml string, args map[string]any) *engine.GateRule {
	t.Helper()
	rs, err := gate.Parse([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	raw := map[string]json.RawMessage{}
	for k, v := range args {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		raw[k] = b
	}
	tr := &toolRules{live: gate.NewLive(rs), log: zerolog.Nop()}
	r := tr.Rule(t.Context(), protocol.ToolRequest{CallID: "c-1", Tool: "t", Args: raw, Agent: "support-bot",
		Context: json.RawMessage(`{"tier":"gold"}`)})
	if r == nil {
		t.Fatal("no rule fired")
	}
	return r
}

func TestATitleAndDescriptionAreFilledWithTheCallsValues(t *testing.T) {
	r := fire(t, ruleHead+"    title: Refund {{args.amount}} {{args.currency}} on order {{ args.orderId }}\n"+
		"    description: \"**{{agent}}** asks for {{tool}} for a {{context.tier}} customer: {{args.note}}\"\n",
		map[string]any{"amount": 4800, "currency": "USD", "orderId": "o-1", "note": "see [here](https://evil.example) <b>now</b>"})
	if r.Title != "Refund 4800 USD on order o-1" {
		t.Errorf("title = %q", r.Title)
	}
	want := `**support-bot** asks for t for a gold customer: see \[here\]\(https://evil.example\) \<b\>now\</b\>`
	if r.Description != want {
		t.Errorf("description = %q, want %q (the note's Markdown escaped)", r.Description, want)
	}
}

func TestAValueTheCallLacksReadsNoneAndALongTitleIsCut(t *testing.T) {
	r := fire(t, ruleHead+"    title: Refund {{args.amount}} on {{args.order.id}} {{args.long}}\n",
		map[string]any{"long": strings.Repeat("x", 1000)})
	if !strings.HasPrefix(r.Title, "Refund (none) on (none) xxx") || len(r.Title) > gate.MaxTitle || !strings.HasSuffix(r.Title, "…") {
		t.Fatalf("title = %q (%d bytes), want (none) for what the call lacks, cut at %d bytes", r.Title, len(r.Title), gate.MaxTitle)
	}
}

func TestAValueCannotBreakTheTitleOntoASecondLine(t *testing.T) {
	r := fire(t, ruleHead+"    title: Send {{args.subject}}\n", map[string]any{"subject": "a\nb\r\nc"})
	if r.Title != "Send a b c" {
		t.Fatalf("title = %q", r.Title)
	}
}

func TestARuleCarriesItsSchemaDecisionsAssigneesQuorumAndReminders(t *testing.T) {
	r := fire(t, ruleHead+`    timeout: 30m
    reminders: [10m, 2m]
    remindEvery: 1h
    decisions: [approve, reject, respond]
    assignees: [ann@example.com, bob@example.com]
    quorum: {required: 2}
    argsSchema:
      type: object
      properties:
        orderId: {type: string, title: Order}
        amount: {type: number, maximum: 5000}
`, map[string]any{"amount": 4800})
	if got := string(r.ArgsSchema); got != `{"type":"object","properties":{"orderId":{"type":"string","title":"Order"},"amount":{"type":"number","maximum":5000}}}` {
		t.Errorf("argsSchema = %s, want the YAML as JSON in its order", got)
	}
	if len(r.Decisions) != 3 || r.Decisions[2] != protocol.VerdictRespond {
		t.Errorf("decisions = %v", r.Decisions)
	}
	if len(r.Assignees) != 2 || r.Assignees[1] != "bob@example.com" {
		t.Errorf("assignees = %v", r.Assignees)
	}
	if r.Quorum == nil || r.Quorum.Required != 2 {
		t.Errorf("quorum = %+v", r.Quorum)
	}
	if len(r.Reminders) != 2 || r.Reminders[0] != 10*time.Minute || r.Reminders[1] != 2*time.Minute {
		t.Errorf("reminders = %v", r.Reminders)
	}
	if r.RemindEvery != time.Hour {
		t.Errorf("remindEvery = %v", r.RemindEvery)
	}
}

func TestASchemaMayBeWrittenAsJSONAndAQuorumByRole(t *testing.T) {
	r := fire(t, ruleHead+`    argsSchema: '{"type": "object", "properties": {"value": {"type": "number"}}}'
    quorum: [{role: legal, count: 1}, {role: finance, count: 1}]
`, nil)
	if !json.Valid(r.ArgsSchema) || !strings.Contains(string(r.ArgsSchema), `"value"`) {
		t.Errorf("argsSchema = %s", r.ArgsSchema)
	}
	if r.Quorum == nil || len(r.Quorum.Roles) != 2 || r.Quorum.Roles[1].Role != "finance" {
		t.Errorf("quorum = %+v", r.Quorum)
	}
}

func TestTheExampleRulesSayWhatEachCallProposes(t *testing.T) {
	rs, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	tr := &toolRules{live: gate.NewLive(rs), log: zerolog.Nop()}
	refund := tr.Rule(t.Context(), protocol.ToolRequest{CallID: "c-1", Tool: "issue_refund",
		Args: map[string]json.RawMessage{"amount": json.RawMessage(`4800`), "currency": json.RawMessage(`"USD"`), "orderId": json.RawMessage(`"o-1"`)}})
	if refund == nil || refund.Title != "Refund $4,800.00 on order o-1" || len(refund.ArgsSchema) == 0 || !strings.Contains(refund.Description, "**$4,800.00**") || !strings.Contains(refund.Reason, "supervisor") {
		t.Fatalf("large-refund = %+v", refund)
	}
	if args := protocol.Args(json.RawMessage(`{"amount":4800,"currency":"USD","orderId":"o-1"}`), refund.ArgsSchema); len(args) != 3 || args[1].Text != "$4,800.00" {
		t.Errorf("the refund's args as shown = %+v", args)
	}
	contract := tr.Rule(t.Context(), protocol.ToolRequest{CallID: "c-2", Tool: "send_contract",
		Args: map[string]json.RawMessage{"value": json.RawMessage(`25000`), "customer": json.RawMessage(`"Acme"`)}})
	if contract == nil || contract.Title != "Send a contract worth $25,000.00 to Acme" {
		t.Fatalf("large-contract = %+v", contract)
	}
	if n := len(contract.Decisions); n == 0 || contract.Decisions[n-1] != protocol.VerdictRespond {
		t.Errorf("large-contract's decisions = %v, want respond among them", contract.Decisions)
	}
	cancel := tr.Rule(t.Context(), protocol.ToolRequest{CallID: "c-3", Tool: "cancel_subscription",
		Args: map[string]json.RawMessage{"plan": json.RawMessage(`"Pro"`), "reason": json.RawMessage(`"too expensive"`)}, Context: json.RawMessage(`{"customer": "Acme"}`)})
	if cancel == nil || cancel.Title != "Cancel the Pro subscription of Acme" || cancel.ApproverRole != "retention_lead" || !strings.Contains(cancel.Description, "retention team") {
		t.Fatalf("cancellation-review = %+v", cancel)
	}
	if args := protocol.Args(json.RawMessage(`{"plan":"Pro","reason":"too expensive"}`), cancel.ArgsSchema); len(args) != 2 || args[0].Title != "Plan" || args[1].Title != "Customer's reason" {
		t.Errorf("the cancellation's args as shown = %+v", args)
	}
}

func TestBadCardFieldsAreRefusedNamingTheRuleAndHowToFixThem(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		wantErr    []string
	}{
		{"title placeholder not closed", "    title: Refund {{args.amount\n", []string{"rule 1 (big): title:", "does not close it with }}", "{{args.amount}}"}},
		{"title placeholder unknown", "    title: Refund {{amount}}\n", []string{"rule 1 (big): title:", "{{amount}} does not name a field of the call", "args.<name>"}},
		{"title placeholder empty", "    title: Refund {{ }}\n", []string{"title: {{}} is an empty placeholder"}},
		{"title args without a name", "    title: Refund {{args}}\n", []string{"{{args}} names no args; write {{args.<name>}}"}},
		{"title tool with a field", "    title: Run {{tool.name}}\n", []string{"tool is text and has no fields; write {{tool}}"}},
		{"title bad key", "    title: Refund {{args.a b}}\n", []string{`"a b" is not an argument's name`}},
		{"title a list", "    title: [a, b]\n", []string{"rule 1 (big): title: must be text, not a list"}},
		{"title two lines", "    title: \"one\\ntwo\"\n", []string{"title: is more than one line", "put the rest in description"}},
		{"title too long", "    title: " + strings.Repeat("t", 401) + "\n", []string{"title: is 401 characters, more than 400"}},
		{"description placeholder bad", "    description: |\n      Pay {{args.amount}} to {{payee}}\n", []string{"rule 1 (big): description:", "{{payee}} does not name a field"}},
		{"description too long", "    description: " + strings.Repeat("d", 8001) + "\n", []string{"description: is 8001 characters, more than 8000; shorten it"}},
		{"schema not a schema", "    argsSchema: {type: objekt}\n", []string{"rule 1 (big): argsSchema:", "not a JSON Schema (draft 2020-12)", "fix the schema"}},
		{"schema of a string", "    argsSchema: {type: string}\n", []string{"argsSchema:", "the args are a JSON object, but the schema's type is string"}},
		{"schema text not JSON", "    argsSchema: type object\n", []string{"argsSchema: is text that is not JSON", "YAML mapping"}},
		{"schema a list", "    argsSchema: [a]\n", []string{"argsSchema: must be a JSON Schema object", "not a list"}},
		{"schema with an alias", "    argsSchema: {type: object, properties: {a: &x {type: number}, b: *x}}\n", []string{"argsSchema: cannot be written as JSON", "without aliases"}},
		{"decision unknown", "    decisions: [approve, answer]\n", []string{"rule 1 (big): decisions[1]: \"answer\" is not a decision; use approve, edit, reject or respond"}},
		{"decision twice", "    decisions: [approve, approve]\n", []string{"decisions[1]: approve is listed twice"}},
		{"decisions without approve", "    decisions: [reject, respond]\n", []string{"decisions: lists no way to let the call run; add approve"}},
		{"decisions empty", "    decisions: []\n", []string{"decisions: is an empty list; list at least one"}},
		{"decisions text", "    decisions: approve\n", []string{"decisions: must be a list, e.g. `decisions: [approve, reject, respond]`"}},
		{"assignee control character", "    assignees: [\"ann\\tb\"]\n", []string{"rule 1 (big): assignees[0]:", "is not a person's name"}},
		{"assignee twice", "    assignees: [ann, ann]\n", []string{"assignees[1]: \"ann\" is listed twice"}},
		{"assignee a mapping", "    assignees: [{name: ann}]\n", []string{"assignees[0]: must be text, not a mapping"}},
		{"quorum a number", "    quorum: 2\n", []string{"rule 1 (big): quorum: is the value \"2\"", "quorum: {required: 2}"}},
		{"quorum of one", "    quorum: {required: 1}\n", []string{"quorum: required 1 is one approver", "require 2 or more"}},
		{"quorum too many", "    quorum: {required: 40}\n", []string{"quorum: required 40 is more than 32 approvers"}},
		{"quorum unknown key", "    quorum: {requires: 2}\n", []string{"quorum: cannot be read", "unknown field"}},
		{"quorum role twice", "    quorum: [{role: legal, count: 1}, {role: legal, count: 1}]\n", []string{"quorum: role legal is listed twice"}},
		{"quorum role count zero", "    quorum: [{role: legal, count: 0}]\n", []string{"quorum: role legal needs a count of 1 to 32"}},
		{"reminders without timeout", "    reminders: [10m]\n", []string{"rule 1 (big): reminders: are set but there is no timeout", "timeout: 30m"}},
		{"reminder not a duration", "    timeout: 30m\n    reminders: [soon]\n", []string{"reminders[0]: \"soon\" is not a duration"}},
		{"reminder past the timeout", "    timeout: 30m\n    reminders: [45m]\n", []string{"reminders[0]: 45m before the deadline is before the approval is asked (timeout is 30m0s)"}},
		{"reminder twice", "    timeout: 30m\n    reminders: [2m, 2m]\n", []string{"reminders[1]: 2m is listed twice"}},
		{"remindEvery not a duration", "    remindEvery: hourly\n", []string{"rule 1 (big): remindEvery: \"hourly\" is not a duration"}},
		{"remindEvery too often", "    remindEvery: 10s\n", []string{"remindEvery: 10s is less than a minute"}},
		{"reminder under a second", "    timeout: 30m\n    reminders: [10ms]\n", []string{"reminders[0]: 10ms is less than a second"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gate.Parse([]byte(ruleHead+tc.yaml), "rules.yaml")
			if err == nil {
				t.Fatal("the rule set loaded; want it refused")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\n does not say %q", err, want)
				}
			}
		})
	}
}
