// Package gate decides whether an agent's tool call needs a person's
// approval. Agent services ask before they run a risky tool; the answer
// comes from rules, which are configuration, not code.
//
// # Rules
//
// A rule set is YAML (the file of `interlock serve --gate-rules FILE`):
//
//	rules:
//	  - name: large-refund            # optional; defaults to <tool>#<index>
//	    tool: issue_refund            # the exact tool name
//	    when: args.amount > 500       # CEL; leave out to match every call
//	    reason: Refund exceeds $500. Supervisor review required.
//	    approverRole: supervisor      # letters, digits, _ and -
//	    timeout: 30m                  # a Go duration; leave out for no deadline
//	    onTimeout: expire             # expire (default), reject, approve or escalate
//	  - tool: send_contract
//	    when: args.value > 10000
//	    reason: Contracts above $10,000 need legal review.
//	    approverRole: legal
//	    timeout: 24h
//	    onTimeout: escalate
//	    escalate: {approverRole: general_counsel, timeout: 24h, onTimeout: expire}
//
// An escalation has approverRole, timeout (required), onTimeout and, when
// that is escalate, its own escalate: chains up to [MaxEscalations] steps.
// `rules: []` is a valid rule set that allows every call; an empty file is
// refused, so that a truncated file does not open the gate.
//
// A rule may also say what the approver reads and who decides:
//
//	title: Refund {{args.amount}} on order {{args.orderId}}  # $4,800.00 with the schema below
//	description: |               # Markdown
//	  Refunds over $500 need a supervisor. You may lower the amount.
//	argsSchema:                   # a JSON Schema (2020-12) of args, YAML or JSON
//	  type: object
//	  properties:
//	    amount: {type: number, title: Amount, x-interlock-display: currency}
//	decisions: [approve, edit, reject, respond]
//	assignees: [ann@example.com]
//	quorum: {required: 2}         # or [{role: legal, count: 1}, {role: finance, count: 1}]
//	reminders: [10m, 2m]          # before timeout
//	remindEvery: 4h               # and every 4h while it waits
//
// Title and description are filled with the call's values by [Rule.Card]:
// a placeholder is {{args.<name>}} (dots reach into objects),
// {{context.<name>}}, {{tool}}, {{agent}} or {{conversationId}}, nothing
// else; a value the call lacks reads (none), and in the description a
// value's Markdown characters are escaped. A placeholder that is not
// closed or names nothing of the call, a schema that does not compile, an
// unknown decision, a quorum of one and a reminder that does not fit the
// timeout are refused when the rule set loads.
//
// [Parse] reads a rule set strictly: an unknown or misspelt field, a
// repeated field or name, a YAML alias, a second document, a malformed or
// negative duration, onTimeout without timeout, escalate without
// onTimeout: escalate (or the reverse) are refused. Every problem is
// reported with its line, the rule's index and name, and how to fix it,
// each as an [*Error]:
//
//	gate rules rules.yaml: line 5: rule 1 (large-refund): when: undeclared reference to 'arg' (did you mean 'args'?) (at 1:1); ...
//
// # Conditions
//
// when is a CEL expression (https://cel.dev) over the request: tool,
// agent and conversationId (strings), and args and context (maps from
// string to any value). It is type-checked when the rule set loads and
// must be a condition (of type bool). Numbers compare across int and
// double, so args.amount > 500 holds for an amount sent as the JSON
// number 500.5. The standard library is available: has(args.note),
// args.items.exists(i, i.price > 100), agent.startsWith("support-"),
// context.tier in ["gold", "vip"].
//
// # Asking
//
// [RuleSet.Match] returns the first rule, in file order, whose tool is the
// request's and whose when holds. No rule means the call may go ahead
// ([Match.Allowed]). A when that fails at run time, for instance
// args.amount on a call without an amount, fires its rule with the failure
// in [Match.Err] (fail closed): a broken rule holds calls for approval
// rather than letting them through. Guard optional arguments with has().
// Each evaluation is bounded by [MaxCost] and by the ctx passed in.
//
// # Live updates
//
// The rule set in force lives in a JetStream key-value bucket
// (interlock_config) under [Key], as the YAML text. At start, a service
// writes the rules of its file there with [Put]; every worker holds a
// [Live], which answers from the current rule set and follows the key:
//
//	live := gate.NewLive(rules)
//	if err := live.Watch(ctx, kv, log); err != nil { ... }
//	defer live.Stop(context.WithoutCancel(ctx))
//	m := live.Match(ctx, req)
//
// A new value that compiles replaces the rule set at once; one that does
// not is refused and logged with the rule and position, and the previous
// rule set stays ([Live.Refused] reports it). Deleting the key keeps the
// rule set in force. [Live.Revision] is the KV revision in force.
package gate
