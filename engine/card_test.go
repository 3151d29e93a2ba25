package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// cardSchema is the schema of a refund's args, with display hints.
const cardSchema = `{"type": "object", "required": ["orderId", "amount"],
 "properties": {
  "amount": {"type": "number", "title": "Amount", "minimum": 0.01, "maximum": 4800, "x-interlock-display": "currency"},
  "currency": {"type": "string", "enum": ["USD", "EUR"]},
  "orderId": {"type": "string", "title": "Order"},
  "contact": {"type": "string", "format": "email"}}}`

type cardState struct {
	Amount float64 `json:"amount"`
	Done   bool    `json:"done,omitempty"`
}

// cardFlow asks one approval with the card given, and a deadline that
// escalates to finance_lead.
func cardFlow(a engine.Approval) *engine.Flow {
	return engine.NewFlow[cardState]("card").
		Node("review", func(ctx context.Context, n *engine.Node[cardState]) error {
			a := a
			a.Action = "issue_refund"
			a.Args = map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "contact": "ann@example.com"}
			a.ApproverRole = "supervisor"
			a.Timeout = 30 * time.Minute
			a.OnTimeout = engine.Escalate("finance_lead", time.Hour, engine.Policy{})
			if _, err := n.Approve(ctx, a); err != nil {
				return err
			}
			return n.Update(engine.Update{"done": true})
		}).
		Start("review").MustBuild()
}

func refundCard() engine.Approval {
	return engine.Approval{
		Title:       "Refund $4,800.00 on order o-1",
		Description: "The customer was **charged twice**. See [ticket 4821](https://support.example/4821).",
		Requester:   "support-bot",
		ArgsSchema:  json.RawMessage(cardSchema),
	}
}

func TestAnApprovalCarriesItsCardOnTheEventTheCheckpointAndThePendingIndex(t *testing.T) {
	h := enginetest.New(t, cardFlow(refundCard()))
	run := h.Start(map[string]any{"amount": 4800})
	in := h.Interrupt(run)
	if in.Title != "Refund $4,800.00 on order o-1" || !strings.Contains(in.Description, "**charged twice**") || in.Requester != "support-bot" {
		t.Fatalf("interrupted event: title %q, description %q, requester %q", in.Title, in.Description, in.Requester)
	}
	var schema map[string]any
	if err := json.Unmarshal(in.ArgsSchema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("interrupted event: argsSchema %s (%v)", in.ArgsSchema, err)
	}
	if in.OnTimeout == nil || in.OnTimeout.Action != "escalate" || in.OnTimeout.ApproverRole != "finance_lead" ||
		in.OnTimeout.Consequence() != "then it goes to finance_lead" {
		t.Fatalf("interrupted event: onTimeout %+v", in.OnTimeout)
	}

	raw, err := h.Checkpoint(run).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := protocol.DecodeCheckpoint(raw, 1)
	if err != nil {
		t.Fatal(err)
	}
	ci := cp.Interrupt
	if ci.Title != in.Title || ci.Description != in.Description || ci.Requester != in.Requester ||
		string(ci.ArgsSchema) != string(in.ArgsSchema) || ci.OnTimeout == nil || ci.OnTimeout.ApproverRole != "finance_lead" {
		t.Fatalf("checkpoint's interrupt = %+v", ci)
	}
	if ev, _ := cp.Interrupted(); ev.Title != in.Title || ev.Requester != in.Requester || ev.OnTimeout == nil {
		t.Fatalf("the checkpoint's interrupted event = %+v", ev)
	}

	p := h.Store.Pending()
	if len(p) != 1 || p[0].Title != in.Title || p[0].Requester != "support-bot" || p[0].OnTimeout == nil || p[0].OnTimeout.ApproverRole != "finance_lead" {
		t.Fatalf("pending index = %+v", p)
	}
	// The row's key args: in the schema's order, the currency said with
	// the amount rather than on its own.
	want := []protocol.KeyArg{{Name: "amount", Title: "Amount", Text: "$4,800.00"}, {Name: "orderId", Title: "Order", Text: "o-1"},
		{Name: "contact", Title: "contact", Text: "ann@example.com"}}
	if got := p[0].KeyArgs; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("pending index key args = %+v, want %+v", got, want)
	}
}

func TestAnEditThatBreaksTheArgsSchemaIsRefusedNamingThePath(t *testing.T) {
	h := enginetest.New(t, cardFlow(refundCard()))
	run := h.Start(map[string]any{"amount": 4800})
	for _, tc := range []struct {
		edits map[string]any
		want  string
	}{
		{map[string]any{"amount": 9000}, "/amount: must be <= 4800"},
		{map[string]any{"amount": 0}, "/amount: must be >= 0.01"},
		{map[string]any{"amount": "lots"}, "/amount: must be number, not string"},
		{map[string]any{"currency": "GBP"}, `/currency: must be one of "USD", "EUR"`},
		{map[string]any{"contact": "not an address"}, "/contact: is not a valid email"},
	} {
		out := h.Decide(run, "edit", tc.edits, "sam", "")
		if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || out.Refused.Message != tc.want {
			t.Fatalf("edit %v: refused %+v, want invalid_answer %q", tc.edits, out.Refused, tc.want)
		}
	}
	// Refused, the approval waits with its token; an edit that fits runs.
	if out := h.Decide(run, "edit", map[string]any{"amount": 400, "currency": "EUR"}, "sam", ""); out.Refused != nil {
		t.Fatalf("edit within the schema refused: %+v", out.Refused)
	}
	h.WantStatus(run, engine.Completed)
}

func TestAnArgsSchemaThatDoesNotCompileFailsTheRun(t *testing.T) {
	for _, tc := range []struct {
		schema, want string
	}{
		{`{"type": "object", "properties": {"amount": {"type": "money"}}}`, "argsSchema: the schema is not a JSON Schema (draft 2020-12): /properties/amount/type:"},
		{`{"type": "object", "properties": {"amount": {"$ref": "file:///etc/passwd"}}}`, "argsSchema: the schema is not a JSON Schema"},
		{`{"type": "string"}`, "argsSchema: the args are a JSON object, but the schema's type is string"},
		{`[1]`, "argsSchema: a schema is a JSON object, not a list"},
	} {
		a := refundCard()
		a.ArgsSchema = json.RawMessage(tc.schema)
		h := enginetest.New(t, cardFlow(a))
		run := h.Start(map[string]any{"amount": 4800})
		cp := h.Checkpoint(run)
		if cp.Status != engine.Failed || !strings.Contains(cp.Error, `approval "issue_refund": `+tc.want) {
			t.Errorf("schema %s: run %s, error %q; want failed with %q", tc.schema, cp.Status, cp.Error, tc.want)
		}
	}
}

func TestATitleOfMoreThanOneLineFailsTheRun(t *testing.T) {
	a := refundCard()
	a.Title = "Refund\nnow"
	h := enginetest.New(t, cardFlow(a))
	run := h.Start(map[string]any{"amount": 4800})
	if cp := h.Checkpoint(run); cp.Status != engine.Failed || !strings.Contains(cp.Error, "the title is one line") {
		t.Fatalf("run %s, error %q", cp.Status, cp.Error)
	}
}

func TestAStaticGateCarriesItsCardAndASchemaThatDoesNotCompileFailsBuild(t *testing.T) {
	b := engine.NewFlow[cardState]("gated").
		Node("pay", func(context.Context, *engine.Node[cardState]) error { return nil }).
		Start("pay")
	_, err := b.GateBefore("pay", engine.Gate{ApproverRole: "supervisor", Title: "Pay it",
		ArgsSchema: json.RawMessage(`{"properties": {"amount": {"minimum": "zero"}}}`)}).Build()
	if err == nil || !strings.Contains(err.Error(), `gate before "pay": approval "pay": argsSchema: the schema is not a JSON Schema`) {
		t.Fatalf("Build with a bad schema: %v", err)
	}

	f := engine.NewFlow[cardState]("gated").
		Node("pay", func(context.Context, *engine.Node[cardState]) error { return nil }).
		Start("pay").
		GateBefore("pay", engine.Gate{ApproverRole: "supervisor", Title: "Pay the refund", Description: "Check the *amount*.",
			Requester: "finance-bot", Fields: []string{"amount"},
			ArgsSchema: json.RawMessage(`{"type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}}`)}).
		MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(map[string]any{"amount": 50})
	in := h.Interrupt(run)
	if in.Title != "Pay the refund" || in.Description != "Check the *amount*." || in.Requester != "finance-bot" || len(in.ArgsSchema) == 0 {
		t.Fatalf("gate's interrupt = %+v", in)
	}
	out := h.Decide(run, "edit", map[string]any{"amount": 500}, "sam", "")
	if out.Refused == nil || out.Refused.Message != "/amount: must be <= 100" {
		t.Fatalf("gate edit over the schema: refused %+v", out.Refused)
	}
}

type contactState struct {
	Email string `json:"email,omitempty"`
	Seats int    `json:"seats,omitempty"`
}

func contactFlow(schema string) *engine.Flow {
	return engine.NewFlow[contactState]("contact").
		Node("ask", func(ctx context.Context, n *engine.Node[contactState]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{
				{Field: "email", Question: "Your email?", Schema: json.RawMessage(schema)},
				{Field: "seats", Question: "How many seats?", Schema: json.RawMessage(`{"type": "integer", "minimum": 1, "maximum": 10}`)},
			}})
			return err
		}).
		Start("ask").MustBuild()
}

func TestAQuestionsAnswerThatBreaksItsSchemaIsRefusedNamingThePath(t *testing.T) {
	h := enginetest.New(t, contactFlow(`{"type": "string", "format": "email"}`))
	run := h.Start(nil)
	in := h.Interrupt(run)
	if in.Questions[0].Type != "string" || in.Questions[1].Type != "integer" || len(in.Questions[1].Schema) == 0 {
		t.Fatalf("questions = %+v: the type follows from the schema, which the question carries", in.Questions)
	}
	for _, tc := range []struct {
		answers map[string]any
		want    string
	}{
		{map[string]any{"email": "ann"}, "/email: is not a valid email"},
		{map[string]any{"seats": 11}, "/seats: must be <= 10"},
	} {
		raw := map[string]json.RawMessage{}
		for k, v := range tc.answers {
			raw[k] = mustMarshal(t, v)
		}
		out := h.Resume(run, engine.Resume{Answers: raw})
		if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || out.Refused.Message != tc.want {
			t.Fatalf("answers %v: refused %+v, want invalid_answer %q", tc.answers, out.Refused, tc.want)
		}
	}
	h.Answer(run, map[string]any{"email": "ann@example.com", "seats": 3})
	h.WantStatus(run, engine.Completed)
}

func TestAStartValueThatBreaksItsQuestionsSchemaIsAskedAgainWithTheError(t *testing.T) {
	h := enginetest.New(t, contactFlow(`{"type": "string", "format": "email"}`))
	run := h.Start(map[string]any{"email": "ann@example.com", "seats": 40})
	in := h.Interrupt(run)
	if len(in.Questions) != 1 || in.Questions[0].Field != "seats" || in.Questions[0].Context != "ERROR: /seats: must be <= 10" {
		t.Fatalf("questions = %+v, want seats asked again with the schema's error", in.Questions)
	}
}

func TestAQuestionsSchemaThatDoesNotCompileFailsTheRun(t *testing.T) {
	h := enginetest.New(t, contactFlow(`{"type": "string", "minLength": -1}`))
	run := h.Start(nil)
	if cp := h.Checkpoint(run); cp.Status != engine.Failed || !strings.Contains(cp.Error, "question 0 (field email): schema: the schema is not a JSON Schema") {
		t.Fatalf("run %s, error %q", cp.Status, cp.Error)
	}
}

func TestAToolCallsApprovalCarriesTheRulesCardAndItsAgentAsRequester(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	rule := *supervisorRule
	rule.Title, rule.Description = "Refund 900 USD", "Refund **900 USD** on order o-1"
	rule.ArgsSchema = json.RawMessage(`{"type": "object", "properties": {"amount": {"type": "number", "maximum": 900, "x-interlock-display": "currency"}}}`)
	request(t, h, "req-1", "call-1", 900, &rule)
	in := h.Interrupt("call-1")
	if in.Title != rule.Title || in.Description != rule.Description || in.Requester != "support-bot" || len(in.ArgsSchema) == 0 {
		t.Fatalf("gate interrupt = %+v", in)
	}
	if out := h.Decide("call-1", "edit", map[string]any{"amount": 1000}, "sam", ""); out.Refused == nil || out.Refused.Message != "/amount: must be <= 900" {
		t.Fatalf("edit over the rule's schema: %+v", out.Refused)
	}
}
