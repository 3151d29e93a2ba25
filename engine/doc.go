// Package engine is Interlock's core: flows, nodes, state, interrupts and
// the runner that moves runs from one checkpoint to the next. It does not
// import NATS; it talks to a [Store] (checkpoints and the pending index) and
// a [Publisher] (events and audit records), which package kv and package bus
// implement on JetStream and package enginetest implements in memory.
//
// # Flows
//
// A flow is a named graph of nodes over a JSON state, declared with a
// [Builder]:
//
//	f, err := engine.NewFlow[Booking]("booking").
//		Node("ask_email", askEmail).
//		Node("pick_topics", pickTopics).
//		Start("ask_email").
//		Edge("ask_email", "pick_topics").
//		Reducer("notes", engine.Append).
//		Build()
//
// The state is a struct with json tags, or map[string]any. Nodes change it
// with [Node.Set] and [Node.Update]; each top-level field goes through its
// [Reducer] (replace, append or merge). After every change the state must
// survive a JSON round trip: a NaN, a func, a channel, a map with non-string
// keys or an unexported struct field fails the node with an error naming the
// key path.
//
// # Interrupts
//
// A node pauses its run with [Node.Ask] (questions that fill state fields)
// or [Node.Choose] (a choice among options). The call returns
// [ErrInterrupted], which the node returns; the run's checkpoint is written
// and an interrupted event published with a single-use resume token. When
// the answer comes, the node runs again from its top and the same call
// returns the answer. Work wrapped in [Step] is not repeated: its recorded
// result is replayed.
//
//	func askEmail(ctx context.Context, n *engine.Node[Booking]) error {
//		_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
//			Field: "email", Question: "What's your email?",
//			Validate: func(_ context.Context, v any) (engine.Update, error) {
//				if s, _ := v.(string); !strings.Contains(s, "@") {
//					return nil, engine.Reject("That doesn't look like an email.")
//				}
//				return nil, nil
//			},
//		}}})
//		return err
//	}
//
// # Approvals, gates and deadlines
//
// [Node.Approve] asks a person with a role to approve, edit or reject a
// proposed action; the node gets the [Decision] (final args, approver,
// reason) and a rejection takes the node's reject route
// ([Builder.OnReject]). [Builder.GateBefore] and [Builder.GateAfter]
// declare the same approval around a node without touching its code. Any
// interrupt may have a Timeout: the NATS server fires the deadline (a
// JetStream message schedule) as an [Expire] command, and the interrupt's
// [Policy] expires the run, decides, or escalates to another role.
// [Runner.Request] answers tool-call requests with the built-in
// [GateFlow].
//
// # Runner
//
// A [Runner] applies [Start], [Resume], [Cancel], [Reannounce], [Expire]
// and [ToolRequest] commands. Each command is one transition, through one loop shared by all
// (transition.go): load the checkpoint, check the command against it, run
// nodes until the run waits or ends, write the checkpoint with
// compare-and-set (starting again from the load when another worker won),
// then update the pending index, append the audit record and publish the
// transition's outbox. Outbound data is typed ([protocol.Interrupted],
// [protocol.AuditRecord], ...); the checkpoint number and the resume token are
// stamped on a copy when it is published, so neither is stored. Every
// refusal is published as a refused event with a code ([CodeTokenMismatch],
// [CodeStaleCheckpoint], ...), after the events of the transition that
// caused it. Each interrupt kind's rules (how a resume answers it, what its
// event says) live in a file of their own: question.go, choice.go,
// approval.go. Audit records are chained by hash ([AuditHash]); the head is
// kept in the checkpoint. Each record is signed with an Ed25519 key derived
// from the secret ([AuditKeyInfo], [Runner.AuditKey]), so that a verifier
// holding the public key can tell the deployment's records from any other.
package engine
