package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// Asks (PROTOCOL.md §8): one interrupt of the caller's design, without a
// flow, over the real bus.

func (r *rig) ask(data map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.AskRequest(), protocol.TypeAskRequest, "", data)
}

func (r *rig) answered(askID string, n int) protocol.Answered {
	r.t.Helper()
	var a protocol.Answered
	natstest.Last(r.t, r.wait("ask", askID, "answered", n), "answered").Decode(r.t, &a)
	return a
}

func TestAQuestionAskIsAnsweredWithinItsSchema(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ask := map[string]any{"askId": "ask-addr", "agent": "support-bot", "conversationId": "conv-9",
		"messages": []any{map[string]any{"role": "user", "content": "ship it to my office"}},
		"origin":   map[string]any{"ticket": "T-1"},
		"interrupt": map[string]any{"kind": "question", "title": "Delivery address",
			"questions": []any{map[string]any{"field": "address", "question": "Where should we ship it?",
				"schema": map[string]any{"type": "string", "minLength": 10}}},
			"timeout": "4h", "onTimeout": map[string]any{"policy": "expire"}}}
	r.ask(ask)
	in := r.interrupt("ask", "ask-addr", 1)
	if in.Kind != "question" || in.Title != "Delivery address" || len(in.Questions) != 1 || in.ExpiresAt == nil || string(in.Origin) != `{"ticket":"T-1"}` {
		t.Fatalf("interrupted = %+v", in)
	}
	if !r.pending("ask", "ask-addr") {
		t.Fatal("the ask is not in the pending index")
	}

	r.resume("ask", "ask-addr", answer(in, map[string]any{"address": "short"}))
	if ref := r.refusal("ask", "ask-addr", 1); ref.Code != protocol.CodeInvalidAnswer || !strings.Contains(ref.Message, "address") {
		t.Fatalf("a too short address = %+v, want invalid_answer naming the field", ref)
	}
	if !r.pending("ask", "ask-addr") {
		t.Fatal("a refused answer ended the ask")
	}

	r.ask(ask) // a repeat while it waits asks nothing
	r.resume("ask", "ask-addr", answer(in, map[string]any{"address": "1 Main Street, Springfield"}))
	a := r.answered("ask-addr", 1)
	if a.Status != protocol.AskAnswered || a.Kind != "question" || string(a.Answers["address"]) != `"1 Main Street, Springfield"` || string(a.Origin) != `{"ticket":"T-1"}` {
		t.Fatalf("answered = %+v", a)
	}
	if n := natstest.Count(r.wait("ask", "ask-addr", "answered", 1), "interrupted"); n != 1 {
		t.Fatalf("%d interrupted events, want one: a repeated ask asked again", n)
	}

	r.ask(ask) // a repeat once settled gets the same answer again
	if again := r.answered("ask-addr", 2); again.Status != a.Status || string(again.Answers["address"]) != string(a.Answers["address"]) {
		t.Fatalf("repeat = %+v, want the same answer", again)
	}
	kv, err := r.js.KeyValue(t.Context(), r.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), "ask.ask-addr")
	if err != nil {
		t.Fatal(err)
	}
	var cp protocol.Checkpoint
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		t.Fatal(err)
	}
	c, ok := cp.Conversation()
	if !ok || c.ID != "conv-9" || c.Agent != "support-bot" || len(c.Messages) != 1 {
		t.Fatalf("conversation = %+v, %v", c, ok)
	}
}

func TestAnApprovalAskTakesItsRoleAndReturnsTheFinalArgs(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, interlock.Config{RequireRoles: true})
	r.ask(map[string]any{"askId": "ask-refund", "agent": "support-bot",
		"interrupt": map[string]any{"kind": "approval", "title": "Refund 4800 USD", "action": "issue_refund",
			"args":         map[string]any{"amount": 4800, "currency": "USD"},
			"argsSchema":   map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"type": "number", "maximum": 5000}}},
			"approverRole": "supervisor", "decisions": []string{"approve", "edit", "reject"}}})
	in := r.interrupt("ask", "ask-refund", 1)
	// Where the NATS server authenticates its clients, callers are
	// identified: the ask's requester is its NATS sender, not the agent
	// it names (a label, kept in its conversation).
	if in.Kind != "approval" || in.ApproverRole != "supervisor" || in.Requester != "nats:/natstest" || in.Title != "Refund 4800 USD" {
		t.Fatalf("interrupted = %+v", in)
	}
	edit := func(amount int) map[string]any {
		return map[string]any{"resumeToken": in.ResumeToken, "decision": "edit", "edits": map[string]any{"amount": amount}, "approver": "sam"}
	}
	natstest.Publish(t, r.js, r.names.ResumeAs("ask", "supervisor"), protocol.TypeResume, "ask-refund", edit(9000))
	if ref := r.refusal("ask", "ask-refund", 1); ref.Code != protocol.CodeInvalidAnswer || !strings.Contains(ref.Message, "/amount") {
		t.Fatalf("an edit beyond the schema = %+v, want invalid_answer naming /amount", ref)
	}
	natstest.Publish(t, r.js, r.names.ResumeAs("ask", "supervisor"), protocol.TypeResume, "ask-refund", edit(400))
	a := r.answered("ask-refund", 1)
	var args map[string]any
	// The role subject's senders are one approver; "sam" is a label.
	if err := json.Unmarshal(a.Args, &args); err != nil || a.Decision != protocol.VerdictEdit || args["amount"] != 400.0 || a.Approver != "nats:supervisor" {
		t.Fatalf("answered = %+v (args %s)", a, a.Args)
	}
}

func TestAChoiceAskThatExpiresIsAnsweredExpired(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.ask(map[string]any{"askId": "ask-pick", "interrupt": map[string]any{"kind": "choice", "question": "Which plan?",
		"options": []any{map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "b", "label": "B"}}, "timeout": "1s"}})
	in := r.interrupt("ask", "ask-pick", 1)
	if in.Kind != "choice" || len(in.Options) != 2 {
		t.Fatalf("interrupted = %+v", in)
	}
	if a := r.answered("ask-pick", 1); a.Status != protocol.AskExpired || a.Kind != "choice" {
		t.Fatalf("answered = %+v, want expired", a)
	}
}

func TestACancelledAskIsAnsweredCancelled(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.ask(map[string]any{"askId": "ask-stop", "interrupt": map[string]any{"kind": "choice", "question": "Go on?",
		"options": []any{map[string]any{"id": "yes", "label": "Yes"}}}})
	r.interrupt("ask", "ask-stop", 1)
	r.send("ask", "cancel", protocol.TypeCancel, "ask-stop", map[string]any{"reason": "the customer left"})
	if a := r.answered("ask-stop", 1); a.Status != protocol.AskCancelled {
		t.Fatalf("answered = %+v, want cancelled", a)
	}
}

func TestAMalformedAskIsRefusedSayingWhatToFix(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i, c := range []struct {
		name string
		ask  map[string]any
		want string
	}{
		{"unknown kind", map[string]any{"askId": "bad-kind", "interrupt": map[string]any{"kind": "poll"}}, "question, choice or approval"},
		{"no question", map[string]any{"askId": "bad-none", "interrupt": map[string]any{"kind": "question"}}, "at least one question"},
		{"bad schema", map[string]any{"askId": "bad-schema", "interrupt": map[string]any{"kind": "question",
			"questions": []any{map[string]any{"field": "x", "question": "X?", "schema": map[string]any{"type": 7}}}}}, "schema"},
		{"field of another kind", map[string]any{"askId": "bad-mix", "interrupt": map[string]any{"kind": "choice", "question": "Q?",
			"options": []any{map[string]any{"id": "a", "label": "A"}}, "approverRole": "supervisor"}}, "approval asks"},
		{"reserved field", map[string]any{"askId": "bad-field", "interrupt": map[string]any{"kind": "question",
			"questions": []any{map[string]any{"field": "answered", "question": "X?"}}}}, "kept by the ask run"},
		{"plain http callback beyond loopback", map[string]any{"askId": "bad-cb", "callbackUrl": "http://agent.example/hook", "interrupt": map[string]any{"kind": "choice", "question": "Q?",
			"options": []any{map[string]any{"id": "a", "label": "A"}}}}, "use https"},
		{"callback with a secret in its query", map[string]any{"askId": "bad-cbq", "callbackUrl": "https://agent.example/hook?token=s3cret", "interrupt": map[string]any{"kind": "choice", "question": "Q?",
			"options": []any{map[string]any{"id": "a", "label": "A"}}}}, "without a query"},
		{"bad timeout", map[string]any{"askId": "bad-time", "interrupt": map[string]any{"kind": "choice", "question": "Q?",
			"options": []any{map[string]any{"id": "a", "label": "A"}}, "timeout": "soon"}}, "Go duration"},
	} {
		r.ask(c.ask)
		run := c.ask["askId"].(string)
		ref := r.refusal("ask", run, 1)
		if ref.Code != protocol.CodeInvalidPayload || !strings.Contains(ref.Message, c.want) {
			t.Errorf("%s: refused %+v, want invalid_payload saying %q", c.name, ref, c.want)
		}
		natstest.WaitFor(t, r.js, r.names.DeadLetterStream(), r.names.DeadLetter("invalid_payload"), natstest.Nth("invalid_payload", i+1))
	}
}
