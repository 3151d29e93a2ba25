package slackbridge_test

import (
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

// handover asks ann, by name and without a role, to approve a shipment.
const handover = "handover"

func handoverFlow() *engine.Flow {
	return approvalFlow(handover, "ship_order", map[string]any{"order": "o-7"},
		engine.Approval{Assignees: []string{"ann@example.com"}})
}

// submitted decodes a view submission's answer: the errors that keep the
// modal open, by block, or none when it closes.
func submitted(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("submission: %d %v", resp.StatusCode, err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	var out struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.ResponseAction != "errors" {
		t.Fatalf("submission answered %s: %v", b, err)
	}
	return out.Errors
}

func person(id string) map[string]any {
	return map[string]any{"type": "users_select", "selected_user": id}
}

func role(name string) map[string]any {
	return map[string]any{"type": "static_select", "selected_option": map[string]any{"value": name}}
}

func TestDelegatingToAPersonLetsTheDelegateDecideAndRefusesTheDelegator(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(handover)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if !strings.Contains(msg.Form.Get("blocks"), "interlock_delegate") {
		t.Fatalf("the approval has no Delegate button: %s", msg.Form.Get("blocks"))
	}

	// Only who may decide it may delegate it: bob is not its assignee.
	h.send(click(agent, "interlock_delegate", msg), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]; eph.Form.Get("user") != agent || !strings.Contains(eph.Form.Get("text"), "Only ann@example.com may decide") {
		t.Errorf("ephemeral to %s: %q", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	if n := len(h.slack.of("views.open")); n != 0 {
		t.Fatalf("a Delegate modal opened for someone who may not decide the approval")
	}

	h.send(click(supervisor, "interlock_delegate", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]
	if el := modalInput(t, opened, "delegate_person"); el["type"] != "users_select" {
		t.Errorf("the person input: %v, want a users_select", el)
	}
	el := modalInput(t, opened, "delegate_role")
	var roles []string
	for _, o := range el["options"].([]any) {
		roles = append(roles, o.(map[string]any)["value"].(string))
	}
	if el["type"] != "static_select" || strings.Join(roles, ",") != "agent,legal,supervisor" {
		t.Errorf("the role input: %v, want a select of agent, legal and supervisor", el)
	}

	errs := submitted(t, h.send(submitState(supervisor, opened, map[string]any{
		"delegate_person": person(agent), "reason": map[string]any{"type": "plain_text_input", "value": "I am on leave"},
	}), time.Now(), secret))
	if errs != nil {
		t.Fatalf("delegating to bob: %v", errs)
	}
	up := h.slack.lastWith(t, "chat.update", "Delegated to *bob@example.com* by *ann@example.com* (I am on leave)")
	if b := up.Form.Get("blocks"); !strings.Contains(b, "Assigned to *bob@example.com*") || up.Form.Get("ts") != msg.TS {
		t.Errorf("the message %s after the delegation: %s", up.Form.Get("ts"), b)
	}
	if rec := h.auditOf(handover, in.Run, protocol.ActionDelegated); rec.By != "ann@example.com" || rec.Reason != "I am on leave" {
		t.Errorf("delegated by %q, reason %q", rec.By, rec.Reason)
	}

	h.send(click(supervisor, "interlock_approve", up), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 2)[1]; eph.Form.Get("user") != supervisor || !strings.Contains(eph.Form.Get("text"), "one of bob@example.com") {
		t.Errorf("the delegator's approve: ephemeral to %s: %q, want a refusal naming bob", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	if h.status(handover, in.Run) != "waiting" {
		t.Fatal("the delegator decided an approval they had delegated")
	}
	h.send(click(agent, "interlock_approve", up), time.Now(), secret)
	h.waitStatus(handover, in.Run, "completed")
	if rec := h.auditOf(handover, in.Run, protocol.ActionApproved); rec.By != "bob@example.com" {
		t.Errorf("approved by %q, want the delegate", rec.By)
	}
	done := h.slack.lastWith(t, "chat.update", "Approved by *bob@example.com*")
	if b := done.Form.Get("blocks"); strings.Contains(b, "interlock_delegate") || !strings.Contains(b, "Delegated to *bob@example.com*") {
		t.Errorf("the settled message: %s", b)
	}
}

func TestDelegatingToARolePostsTheCardInTheRolesChannel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_delegate", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]
	if errs := submitted(t, h.send(submitState(supervisor, opened, map[string]any{"delegate_role": role("legal")}), time.Now(), secret)); errs != nil {
		t.Fatalf("delegating to legal: %v", errs)
	}

	copied := h.slack.wait(t, "chat.postMessage", 2)[1]
	b := copied.Form.Get("blocks")
	if copied.Form.Get("channel") != channelLaw || !strings.Contains(b, "Approver role *legal*") ||
		!strings.Contains(b, "Delegated to the *legal* role by *ann@example.com*") || !strings.Contains(b, "interlock_approve") {
		t.Errorf("posted in %s: %s, want the card with its buttons in the legal channel", copied.Form.Get("channel"), b)
	}
	up := h.slack.lastWith(t, "chat.update", "Delegated to the *legal* role")
	if up.Form.Get("channel") != channelSup || up.Form.Get("ts") != msg.TS {
		t.Errorf("updated %s %s, want the first message", up.Form.Get("channel"), up.Form.Get("ts"))
	}

	h.send(click(supervisor, "interlock_approve", up), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]; !strings.Contains(eph.Form.Get("text"), "legal") {
		t.Errorf("a supervisor's approve after the delegation: %q, want a refusal naming legal", eph.Form.Get("text"))
	}
	h.send(click(lawyer, "interlock_approve", copied), time.Now(), secret)
	h.waitStatus(payout, in.Run, "completed")
	// Both messages are settled.
	for _, m := range []call{msg, copied} {
		natstest.Eventually(t, "message "+m.TS+" settled", func() bool {
			for _, c := range h.slack.of("chat.update") {
				if c.Form.Get("channel") == m.Form.Get("channel") && c.Form.Get("ts") == m.TS &&
					strings.Contains(c.Form.Get("blocks"), "Approved by *dan@example.com*") {
					return true
				}
			}
			return false
		})
	}
	if n := len(h.slack.of("chat.postMessage")); n != 2 {
		t.Errorf("%d messages posted, want the card and its copy in the legal channel", n)
	}
}

func TestDelegatingToASlackUserTheBridgeDoesNotKnowIsRefusedInTheModal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_delegate", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]

	for _, tc := range []struct {
		name   string
		inputs map[string]any
		block  string
		want   string
	}{
		{"an unconfigured Slack user", map[string]any{"delegate_person": person(stranger)}, "delegate_person", "(" + stranger + ") is not configured"},
		{"nobody", map[string]any{}, "delegate_person", "Pick the person or the role"},
		{"both", map[string]any{"delegate_person": person(agent), "delegate_role": role("legal")}, "delegate_person", "not both"},
		{"a role not listed", map[string]any{"delegate_role": role("root")}, "delegate_role", "listed roles"},
	} {
		errs := submitted(t, h.send(submitState(supervisor, opened, tc.inputs), time.Now(), secret))
		if !strings.Contains(errs[tc.block], tc.want) {
			t.Errorf("%s: errors %v, want %q on %s", tc.name, errs, tc.want, tc.block)
		}
	}
	cp, err := h.svc.Client("/test").Checkpoint(t.Context(), payout, in.Run)
	if err != nil {
		t.Fatal(err)
	}
	if i := cp.Interrupt; i == nil || len(i.Assignees) != 0 || i.ApproverRole != "supervisor" {
		t.Errorf("after refused delegations the approval reads %+v", i)
	}
	if n := len(h.slack.of("chat.update")); n != 0 {
		t.Errorf("%d message updates after refused delegations", n)
	}
}

func TestSettledMessageQuotesTheRespondMessageWithoutMentionsOrLinks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.startApproval(payout)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_respond", msg), time.Now(), secret)
	opened := h.slack.wait(t, "views.open", 1)[0]
	const hostileMessage = "Ask <!channel> and <@U0BOSS> @here first: <https://evil.example/x|bank.example> https://evil.example/y"
	if errs := submitted(t, h.send(submit(supervisor, opened, map[string]string{"message": hostileMessage}), time.Now(), secret)); errs != nil {
		t.Fatalf("respond: %v", errs)
	}
	h.waitStatus(payout, in.Run, "completed")
	up := h.slack.lastWith(t, "chat.update", "Responded by *ann@example.com*")
	var outcome map[string]any
	for _, b := range blocksOf(t, up) {
		if b["block_id"] == "interlock_outcome" {
			outcome = b["elements"].([]any)[0].(map[string]any)
		}
	}
	text, _ := outcome["text"].(string)
	if !strings.Contains(text, "Responded by *ann@example.com*: “Ask &lt;!channel&gt; and &lt;@U0BOSS&gt; @\u200bhere first: &lt;https://evil.example/x|bank.example&gt; https://evil.example/y”") {
		t.Errorf("the outcome %q does not quote the message escaped", text)
	}
	if outcome["verbatim"] != true {
		t.Errorf("the outcome %v is not verbatim: Slack would make links of it", outcome)
	}
	for _, bad := range []string{"<!channel>", "<@U0BOSS>", "@here", "<https://", "<http"} {
		if strings.Contains(text, bad) {
			t.Errorf("the outcome holds %q: %s", bad, text)
		}
	}
	if rec := h.auditOf(payout, in.Run, protocol.ActionResponded); rec.Message != hostileMessage {
		t.Errorf("the audit record's message %q", rec.Message)
	}
}
