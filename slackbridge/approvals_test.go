package slackbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// The flows of these tests: payout asks an approval with a card (a
// title, a hostile description, an args schema), respond allowed and a
// deadline that escalates; contract takes two approvers; remind reminds
// the supervisors a second after asking.
const (
	payout   = "payout"
	contract = "contract"
	remindMe = "remindme"
)

const payoutSchema = `{"type": "object", "required": ["amount"],
 "properties": {
  "amount": {"type": "number", "title": "Amount", "minimum": 1, "maximum": 5000, "x-interlock-display": "currency"},
  "currency": {"type": "string", "title": "Currency", "enum": ["USD", "EUR"]},
  "payee": {"type": "string", "title": "Payee", "format": "email"},
  "urgent": {"type": "boolean", "title": "Urgent"},
  "note": {"type": "string", "title": "Note", "x-interlock-display": "markdown"}}}`

// hostile is a description written to abuse Slack: mentions of everyone,
// a link whose label is another address, HTML and a tracking image.
const hostile = "Pay **now** <!channel> <@U0BOSS> @here\n" +
	"[https://bank.example/login](https://evil.example/steal) <script>alert(1)</script> ![x](https://tracker.example/p.png)"

type decisionState struct {
	Verdict string `json:"verdict,omitempty"`
	Message string `json:"message,omitempty"`
	Amount  any    `json:"amount,omitempty"`
}

// approvalFlow asks a's approval of action with args, and records what
// the node got.
func approvalFlow(name, action string, args map[string]any, a engine.Approval) *engine.Flow {
	return engine.NewFlow[decisionState](name).
		Node("review", func(ctx context.Context, n *engine.Node[decisionState]) error {
			ask := a
			ask.Action, ask.Args = action, args
			d, err := n.Approve(ctx, ask)
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict), "message": d.Message, "amount": d.Args["amount"]})
		}).
		Start("review").MustBuild()
}

func payoutFlow() *engine.Flow {
	return approvalFlow(payout, "pay_invoice",
		map[string]any{"amount": 4800, "currency": "USD", "payee": "billing@acme.example", "urgent": false, "note": "Invoice <!here> *7*"},
		engine.Approval{
			Title: "Pay Acme <!channel> invoice 7", Description: hostile, Requester: "billing-bot",
			ArgsSchema: json.RawMessage(payoutSchema), ApproverRole: "supervisor",
			Decisions: []engine.Verdict{"approve", "edit", "reject", "respond"},
			Timeout:   time.Hour, OnTimeout: engine.Escalate("finance_lead", time.Hour, engine.Policy{}),
		})
}

func contractFlow() *engine.Flow {
	return approvalFlow(contract, "send_contract", map[string]any{"customer": "Acme", "amount": 12000},
		engine.Approval{ApproverRole: "supervisor", Quorum: &protocol.Quorum{Required: 2}, Requester: "sales-bot"})
}

func remindFlow() *engine.Flow {
	return approvalFlow(remindMe, "send_contract", map[string]any{"customer": "Acme"},
		engine.Approval{ApproverRole: "supervisor", Timeout: 4 * time.Second, Reminders: []time.Duration{3 * time.Second}})
}

// startApproval starts a run of flow that waits on an approval.
func (h *harness) startApproval(flow string) protocol.Interrupted {
	h.t.Helper()
	ev, err := h.svc.Client("/test").Start(h.t.Context(), flow, "", nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil || in.Kind != protocol.KindApproval {
		h.t.Fatalf("start %s: %s %v", flow, ev.Kind, err)
	}
	return in
}

func (h *harness) state(flow, run string) decisionState {
	h.t.Helper()
	cp, err := h.svc.Client("/test").Checkpoint(h.t.Context(), flow, run)
	if err != nil {
		h.t.Fatal(err)
	}
	var s decisionState
	if err := json.Unmarshal(cp.State, &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// auditOf returns the run's latest audit record of action.
func (h *harness) auditOf(flow, run, action string) protocol.AuditRecord {
	h.t.Helper()
	var rec protocol.AuditRecord
	natstest.WaitFor(h.t, h.svc.JetStream(), h.svc.Names().AuditStream(), h.svc.Names().Audit(flow, run),
		func(rs []natstest.Received) bool {
			for i := len(rs) - 1; i >= 0; i-- {
				var r protocol.AuditRecord
				if json.Unmarshal(rs[i].Event.Data(), &r) == nil && r.Action == action {
					rec = r
					return true
				}
			}
			return false
		})
	return rec
}

// blocksOf decodes the blocks of a posted or updated message.
func blocksOf(t *testing.T, c call) []map[string]any {
	t.Helper()
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(c.Form.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks of %s: %v", c.Method, err)
	}
	return blocks
}

// textOf is every text of blocks, as Slack reads it, one a line.
func textOf(blocks []map[string]any) string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if t, ok := v["text"].(string); ok {
				out = append(out, t)
			}
			for k, x := range v {
				if k != "text" {
					walk(x)
				} else if _, ok := x.(string); !ok {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, b := range blocks {
		walk(b)
	}
	return strings.Join(out, "\n")
}

// modalInput returns the element of block id in an opened modal.
func modalInput(t *testing.T, opened call, id string) map[string]any {
	t.Helper()
	view, _ := opened.JSON["view"].(map[string]any)
	blocks, _ := view["blocks"].([]any)
	for _, b := range blocks {
		if b, _ := b.(map[string]any); b["block_id"] == id {
			el, _ := b["element"].(map[string]any)
			return el
		}
	}
	t.Fatalf("the modal has no block %s: %v", id, blocks)
	return nil
}

// lastWith returns the latest call of method whose blocks hold s.
func (f *fakeSlack) lastWith(t *testing.T, method, s string) call {
	t.Helper()
	var got call
	natstest.Eventually(t, method+" with "+s, func() bool {
		cs := f.of(method)
		for i := len(cs) - 1; i >= 0; i-- {
			if strings.Contains(cs[i].Form.Get("blocks"), s) {
				got = cs[i]
				return true
			}
		}
		return false
	})
	return got
}

func TestApprovalMessageShowsTheCardWithArgsAsFieldsNotJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	raw := msg.Form.Get("blocks")
	shown := textOf(blocksOf(t, msg))

	var fields []string
	for _, b := range blocksOf(t, msg) {
		fs, _ := b["fields"].([]any)
		for _, f := range fs {
			f, _ := f.(map[string]any)
			fields = append(fields, f["text"].(string))
		}
	}
	want := []string{"*Amount*\n$4,800.00", "*Currency*\nUSD", "*Payee*\n<mailto:billing@acme.example|billing@acme.example>", "*Urgent*\nno",
		"*Note*\nInvoice &lt;!here&gt; _7_"}
	if strings.Join(fields, "|") != strings.Join(want, "|") {
		t.Errorf("argument fields:\n%q\nwant\n%q", fields, want)
	}
	if strings.Contains(shown, `"amount"`) || strings.Contains(shown, "```") {
		t.Errorf("the message shows the args as JSON: %s", shown)
	}
	for _, want := range []string{
		"*Pay Acme &lt;!channel&gt; invoice 7*", "Action `pay_invoice`",
		"Requested by *billing-bot*", "Approver role *supervisor*",
		"{date_short_pretty} {time}|", " UTC>", "then it goes to finance_lead",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the message lacks %q: %s", want, shown)
		}
	}
	for _, want := range []string{"interlock_approve", "interlock_edit", "interlock_reject", "interlock_respond", "interlock_claim"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the message lacks the button %s: %s", want, raw)
		}
	}
	// Nothing from the flow mentions anyone, links under a false label,
	// or carries HTML or an image.
	for _, bad := range []string{"<!channel>", "<!here>", "<@U0BOSS>", "@here", "|https://bank.example", "<script", "tracker.example"} {
		if strings.Contains(shown, bad) {
			t.Errorf("the message holds %q: %s", bad, shown)
		}
	}
	if !strings.Contains(shown, "(<https://evil.example/steal|evil.example>)") {
		t.Errorf("the description's link is not shown with the host it goes to: %s", shown)
	}
	if strings.Contains(raw, "interlock_release") {
		t.Error("an approval nobody claimed has a Release button")
	}
	if text := msg.Form.Get("text"); strings.Contains(text, "<!channel>") {
		t.Errorf("the notification text %q mentions the channel", text)
	}
	var verbatim int
	for _, b := range blocksOf(t, msg) {
		if tx, ok := b["text"].(map[string]any); ok && tx["verbatim"] == true {
			verbatim++
		}
	}
	if verbatim == 0 {
		t.Error("no section text is verbatim: Slack would look for names and links in it")
	}
}

func TestEditModalHasAnInputOfEachArgumentsTypeAndShowsASchemaRefusalOnItsField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_edit", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]

	amount := modalInput(t, opened, "arg:amount")
	if amount["type"] != "number_input" || amount["initial_value"] != "4800" || amount["min_value"] != "1" || amount["max_value"] != "5000" || amount["is_decimal_allowed"] != true {
		t.Errorf("amount: %v, want a number input of 1 to 5000 holding 4800", amount)
	}
	currency := modalInput(t, opened, "arg:currency")
	initial, _ := currency["initial_option"].(map[string]any)
	if currency["type"] != "static_select" || len(currency["options"].([]any)) != 2 || initial["value"] != `"USD"` {
		t.Errorf("currency: %v, want a select of USD and EUR, USD chosen", currency)
	}
	if payee := modalInput(t, opened, "arg:payee"); payee["type"] != "email_text_input" || payee["initial_value"] != "billing@acme.example" {
		t.Errorf("payee: %v", payee)
	}
	if urgent := modalInput(t, opened, "arg:urgent"); urgent["type"] != "checkboxes" || urgent["initial_options"] != nil {
		t.Errorf("urgent: %v, want an unticked checkbox", urgent)
	}
	if note := modalInput(t, opened, "arg:note"); note["type"] != "plain_text_input" || note["multiline"] != true || note["initial_value"] != "Invoice <!here> *7*" {
		t.Errorf("note: %v", note)
	}

	// The engine refuses an amount over the schema's maximum; the error
	// is shown on the amount's field.
	inputs := map[string]any{
		"arg:amount":   map[string]any{"type": "number_input", "value": "9000"},
		"arg:currency": map[string]any{"type": "static_select", "selected_option": map[string]any{"value": `"EUR"`}},
		"arg:urgent":   map[string]any{"type": "checkboxes", "selected_options": []any{map[string]any{"value": "true"}}},
	}
	resp := h.send(submitState(supervisor, opened, inputs), time.Now(), secret)
	var out struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if out.ResponseAction != "errors" || !strings.Contains(out.Errors["arg:amount"], "/amount: must be <= 5000") {
		t.Fatalf("%+v, want the schema's refusal on arg:amount", out)
	}
	inputs["arg:amount"] = map[string]any{"type": "number_input", "value": "4000"}
	resp = h.send(submitState(supervisor, opened, inputs), time.Now(), secret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submission: %d", resp.StatusCode)
	}
	h.waitStatus(payout, in.Run, "completed")
	if rec := h.auditOf(payout, in.Run, "edited"); rec.By != "ann@example.com" {
		t.Errorf("edited by %q", rec.By)
	}
	names := h.svc.Names()
	rs := natstest.WaitFor(t, h.svc.JetStream(), names.EventStream(), names.Event(payout, in.Run, protocol.EventResumed), natstest.Nth(protocol.EventResumed, 1))
	var r protocol.Resumed
	rs[0].Decode(t, &r)
	var edits map[string]any
	_ = json.Unmarshal(r.Edits, &edits)
	if edits["amount"] != 4000.0 || edits["currency"] != "EUR" || edits["urgent"] != true || len(edits) != 3 {
		t.Errorf("edits %s, want the three arguments changed and no other", r.Edits)
	}
}

func TestClaimedApprovalRefusesAnotherUsersApproveNamingTheClaimant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]

	h.send(click(supervisor, "interlock_claim", msg), time.Now(), secret)
	claimed := h.slack.lastWith(t, "chat.update", "Claimed by *ann@example.com*")
	if b := claimed.Form.Get("blocks"); !strings.Contains(b, "interlock_release") || strings.Contains(b, "interlock_claim") {
		t.Errorf("the claimed message: %s, want Release in place of Claim", b)
	}
	if rec := h.auditOf(payout, in.Run, "claimed"); rec.By != "ann@example.com" {
		t.Errorf("claimed by %q", rec.By)
	}

	h.send(click(second, "interlock_approve", claimed), time.Now(), secret)
	eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]
	if eph.Form.Get("user") != second || !strings.Contains(eph.Form.Get("text"), "claimed by ann@example.com") {
		t.Errorf("ephemeral to %s: %q, want to %s naming the claimant", eph.Form.Get("user"), eph.Form.Get("text"), second)
	}
	// Nor may they open a modal on it.
	h.send(click(second, "interlock_edit", claimed), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 2)[1]; !strings.Contains(eph.Form.Get("text"), "claimed by ann@example.com") {
		t.Errorf("ephemeral %q", eph.Form.Get("text"))
	}
	if h.status(payout, in.Run) != "waiting" || len(h.slack.of("views.open")) != 0 {
		t.Fatal("a claimed approval was decided, or a modal opened, for someone else")
	}

	h.send(click(supervisor, "interlock_release", claimed), time.Now(), secret)
	released := h.slack.lastWith(t, "chat.update", "interlock_claim")
	h.send(click(second, "interlock_approve", released), time.Now(), secret)
	h.waitStatus(payout, in.Run, "completed")
	if rec := h.auditOf(payout, in.Run, "approved"); rec.By != "cat@example.com" {
		t.Errorf("approved by %q after the release", rec.By)
	}
}

func TestRespondGivesTheNodeTheMessageOfTheModal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_respond", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]
	if el := modalInput(t, opened, "message"); el["type"] != "plain_text_input" {
		t.Fatalf("the respond modal's message: %v", el)
	}
	resp := h.send(submit(supervisor, opened, map[string]string{"message": " "}), time.Now(), secret)
	var out struct {
		Errors map[string]string `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Errors["message"] == "" {
		t.Fatalf("an empty message: %+v %v, want an error on message", out, err)
	}
	resp = h.send(submit(supervisor, opened, map[string]string{"message": "Ask Acme for the PO number first."}), time.Now(), secret)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(strings.TrimSpace(string(b))) != 0 {
		t.Fatalf("submission: %d %s, want 200 and no body (the modal closes)", resp.StatusCode, b)
	}
	h.waitStatus(payout, in.Run, "completed")
	if s := h.state(payout, in.Run); s.Verdict != "respond" || s.Message != "Ask Acme for the PO number first." {
		t.Errorf("the node got %+v, want respond with the message", s)
	}
	if rec := h.auditOf(payout, in.Run, protocol.ActionResponded); rec.By != "ann@example.com" {
		t.Errorf("responded by %q", rec.By)
	}
	up := h.slack.lastWith(t, "chat.update", "Responded by *ann@example.com*")
	if strings.Contains(up.Form.Get("blocks"), "interlock_approve") {
		t.Errorf("the settled message keeps its buttons: %s", up.Form.Get("blocks"))
	}
}

func TestReminderIsPostedInTheMessagesThreadMentioningTheRolesSlackUsers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startApproval(remindMe)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	ts := "1700000000.000002"
	reminder := h.slack.wait(t, "chat.postMessage", 2)[1]
	if reminder.Form.Get("channel") != channelSup || reminder.Form.Get("thread_ts") != ts {
		t.Errorf("reminder posted in %s thread %q, want the message's thread %s (message %s)", reminder.Form.Get("channel"), reminder.Form.Get("thread_ts"), ts, msg.Form.Get("channel"))
	}
	text := reminder.Form.Get("text")
	if !strings.Contains(text, "<@"+supervisor+"> <@"+second+">") || strings.Contains(text, agent) || !strings.Contains(text, "still waits on you") {
		t.Errorf("reminder %q, want it to mention the supervisors only", text)
	}
}

func TestTwoPersonApprovalFromTwoSlackUsersKeepsOneMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(contract)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if !strings.Contains(msg.Form.Get("blocks"), "Approvals: *0 of 2*") {
		t.Errorf("the message does not say the quorum: %s", msg.Form.Get("blocks"))
	}
	h.send(click(supervisor, "interlock_approve", msg), time.Now(), secret)
	// The voted event and the approval asked again both update the one
	// message; its buttons now name the fresh request.
	natstest.Eventually(t, "the re-asked request", func() bool {
		cp, err := h.svc.Client("/test").Checkpoint(t.Context(), contract, in.Run)
		return err == nil && cp.Interrupt != nil && cp.Interrupt.RequestID != in.RequestID
	})
	cp, _ := h.svc.Client("/test").Checkpoint(t.Context(), contract, in.Run)
	again := h.slack.lastWith(t, "chat.update", cp.Interrupt.RequestID)
	if b := again.Form.Get("blocks"); !strings.Contains(b, "Approvals: *1 of 2* (*ann@example.com*)") || again.Form.Get("ts") != "1700000000.000002" {
		t.Errorf("after one vote the message %s reads %s", again.Form.Get("ts"), b)
	}
	// The first voter may not vote again.
	h.send(click(supervisor, "interlock_approve", again), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]; eph.Form.Get("user") != supervisor {
		t.Errorf("ephemeral to %s: %q", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	h.send(click(second, "interlock_approve", again), time.Now(), secret)
	h.waitStatus(contract, in.Run, "completed")
	done := h.slack.lastWith(t, "chat.update", "Approved by *cat@example.com* with *ann@example.com*")
	if strings.Contains(done.Form.Get("blocks"), "interlock_approve") {
		t.Errorf("the settled message keeps its buttons: %s", done.Form.Get("blocks"))
	}
	if n := len(h.slack.of("chat.postMessage")); n != 1 {
		t.Errorf("%d messages posted for one two-person approval, want 1", n)
	}
	if s := h.state(contract, in.Run); s.Verdict != "approve" {
		t.Errorf("the node got %+v", s)
	}
}
