package gate_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/interlockhq/interlock/gate"
)

// Parse a rule set and ask it about tool calls.
func Example() {
	rules, err := gate.Parse([]byte(`
rules:
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    reason: Refunds over $500 need a supervisor's approval.
    approverRole: supervisor
    timeout: 30m
`), "rules.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, call := range []string{
		`{"callId": "c-1", "tool": "issue_refund", "args": {"amount": 4800}}`,
		`{"callId": "c-2", "tool": "issue_refund", "args": {"amount": 200}}`,
		`{"callId": "c-3", "tool": "lookup_order", "args": {"orderId": "o-7"}}`,
		`{"callId": "c-4", "tool": "issue_refund", "args": {"orderId": "o-7"}}`,
	} {
		var req gate.Request
		if err := json.Unmarshal([]byte(call), &req); err != nil {
			fmt.Println(err)
			return
		}
		m := rules.Match(context.Background(), req)
		switch {
		case m.Allowed():
			fmt.Printf("%s: allowed\n", req.CallID)
		case m.Err != nil:
			fmt.Printf("%s: held by %s, whose when failed\n", req.CallID, m.Rule.Name)
		default:
			fmt.Printf("%s: needs %s within %s: %s\n", req.CallID, m.Rule.ApproverRole, m.Rule.Timeout, m.Rule.Reason)
		}
	}
	// Output:
	// c-1: needs supervisor within 30m0s: Refunds over $500 need a supervisor's approval.
	// c-2: allowed
	// c-3: allowed
	// c-4: held by large-refund, whose when failed
}

// Errors say where the problem is and how to fix it.
func ExampleParse_error() {
	_, err := gate.Parse([]byte(`
rules:
  - name: large-refund
    tool: issue_refund
    when: arg.amount > 500
    reason: Refunds over $500 need a supervisor's approval.
    approverrole: supervisor
`), "rules.yaml")
	fmt.Println(err)
	// Output:
	// gate rules rules.yaml: line 7: rule 1 (large-refund): unknown field "approverrole"; did you mean "approverRole"? Field names are case-sensitive
	// gate rules rules.yaml: line 3: rule 1 (large-refund): approverRole: is missing; name the role that may approve, e.g. `approverRole: supervisor`
	// gate rules rules.yaml: line 5: rule 1 (large-refund): when: undeclared reference to 'arg' (did you mean 'args'?) (at 1:1); the variables are tool, server, args, agent, conversationId and context, and arguments are read as args.<name>
}
