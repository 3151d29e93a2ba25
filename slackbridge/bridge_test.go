package slackbridge_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/slackbridge"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const (
	secret     = "8f742231b10e8888abcd99yyyzzz85a5"
	supervisor = "UANN"
	second     = "UCAT"
	agent      = "UBOB"
	stranger   = "UEVE"
	lawyer     = "UDAN"
	channelSup = "CSUPERVISORS"
	channelDef = "CGENERAL"
	channelLaw = "CLEGAL"
)

// call is one Web API call the fake received.
type call struct {
	Method string
	Form   url.Values
	JSON   map[string]any
	// TS is the ts the fake answered a chat.postMessage with.
	TS string
}

// fakeSlack plays the Web API methods the bridge calls.
type fakeSlack struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []call
	ts    int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	c := call{Method: method}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &c.JSON)
	} else {
		_ = r.ParseForm()
		c.Form = r.PostForm
	}
	f.mu.Lock()
	f.ts++
	ts := fmt.Sprintf("1700000000.%06d", f.ts)
	if method == "chat.postMessage" {
		c.TS = ts
	}
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "auth.test":
		fmt.Fprint(w, `{"ok":true,"team":"Acme","user_id":"UBOT"}`)
	case "chat.postMessage":
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, c.Form.Get("channel"), ts)
	case "chat.update":
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q,"text":""}`, c.Form.Get("channel"), c.Form.Get("ts"))
	case "chat.postEphemeral":
		fmt.Fprintf(w, `{"ok":true,"message_ts":%q}`, ts)
	case "views.open":
		fmt.Fprint(w, `{"ok":true,"view":{"id":"V1"}}`)
	default:
		fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

// of returns the calls of method so far.
func (f *fakeSlack) of(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// wait waits until there are n calls of method, and returns them.
func (f *fakeSlack) wait(t *testing.T, method string, n int) []call {
	t.Helper()
	natstest.Eventually(t, fmt.Sprintf("%d calls of %s", n, method), func() bool { return len(f.of(method)) >= n })
	return f.of(method)
}

// fakeSlackAllowed lets the bridge reach the fake Slack on 127.0.0.1,
// allowed by name as for local development.
var fakeSlackAllowed = egress.Policy{Allow: []string{"127.0.0.1"}}

type harness struct {
	t     *testing.T
	svc   *interlock.Service
	slack *fakeSlack
	cfg   slackbridge.Config
	b     *slackbridge.Bridge
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := natstest.StartServer(t, "")
	h := &harness{t: t, svc: natstest.Start(t, srv, refund.Flow(), booking.Flow(), payoutFlow(), contractFlow(), remindFlow(), handoverFlow()), slack: newFakeSlack(t)}
	h.cfg = slackbridge.Config{
		Token: "xoxb-test", SigningSecret: secret, Addr: "127.0.0.1:0", APIURL: h.slack.srv.URL + "/api/", Egress: fakeSlackAllowed,
		Channels:       map[string]string{refund.SupervisorRole: channelSup, "legal": channelLaw},
		DefaultChannel: channelDef,
		Users: map[string]slackbridge.User{
			supervisor: {Name: "ann@example.com", Roles: []string{refund.SupervisorRole}},
			second:     {Name: "cat@example.com", Roles: []string{refund.SupervisorRole}},
			agent:      {Name: "bob@example.com", Roles: []string{"agent"}},
			lawyer:     {Name: "dan@example.com", Roles: []string{"legal"}},
		},
	}
	h.start()
	return h
}

// start starts a bridge on the service, stopped at cleanup.
func (h *harness) start() {
	h.t.Helper()
	b, err := slackbridge.New(h.svc, h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := b.Start(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = b.Stop(context.WithoutCancel(h.t.Context())) })
	h.b = b
}

// refund starts a refund that waits on a supervisor's approval.
func (h *harness) refund(origin string) string {
	h.t.Helper()
	return h.refundWith(origin, nil)
}

func (h *harness) refundWith(origin string, extra map[string]json.RawMessage) string {
	h.t.Helper()
	state := map[string]json.RawMessage{
		"orderId": json.RawMessage(`"o-1"`), "amount": json.RawMessage(`4800`),
		"currency": json.RawMessage(`"USD"`), "last4": json.RawMessage(`"4242"`),
	}
	for k, v := range extra {
		state[k] = v
	}
	var o json.RawMessage
	if origin != "" {
		o = json.RawMessage(origin)
	}
	ev, err := h.svc.Client("/test").Start(h.t.Context(), refund.Name, "", state, o)
	if err != nil {
		h.t.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil || in.Kind != "approval" {
		h.t.Fatalf("start: %s %v (%+v)", ev.Kind, err, in)
	}
	return in.Run
}

// send posts a signed interaction to the bridge's endpoint.
func (h *harness) send(payload any, at time.Time, key string) *http.Response {
	h.t.Helper()
	return sendTo(h.t, h.b, payload, at, key)
}

// sendTo posts an interaction to b's endpoint as Slack does, signed with
// key at time at; the response's body is closed at t's cleanup.
func sendTo(t *testing.T, b *slackbridge.Bridge, payload any, at time.Time, key string) *http.Response {
	t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	body := "payload=" + url.QueryEscape(string(p))
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("v0:" + ts + ":" + body))
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+b.Addr()+"/slack/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// click is a block_actions payload: user clicks action on the message.
func click(user, action string, msg call) map[string]any {
	var value string
	var blocks []map[string]any
	_ = json.Unmarshal([]byte(msg.Form.Get("blocks")), &blocks)
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["action_id"] == action {
				value, _ = el["value"].(string)
			}
		}
	}
	return map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "trigger_id": "trig-" + user,
		"channel":   map[string]any{"id": msg.Form.Get("channel")},
		"container": map[string]any{"type": "message", "channel_id": msg.Form.Get("channel"), "thread_ts": msg.Form.Get("thread_ts")},
		"actions": []any{map[string]any{
			"action_id": action, "block_id": "interlock_actions", "value": value, "type": "button",
			"action_ts": strconv.FormatInt(time.Now().UnixNano(), 10),
		}},
	}
}

// submit is a view_submission payload of the modal opened by views.open,
// its inputs of text.
func submit(user string, opened call, values map[string]string) map[string]any {
	state := map[string]any{}
	for block, v := range values {
		state[block] = map[string]any{"type": "plain_text_input", "value": v}
	}
	return submitState(user, opened, state)
}

// submitState is a view_submission payload with the state of each block's
// input as Slack sends it.
func submitState(user string, opened call, inputs map[string]any) map[string]any {
	view, _ := opened.JSON["view"].(map[string]any)
	state := map[string]any{}
	for block, v := range inputs {
		state[block] = map[string]any{"value": v}
	}
	return map[string]any{
		"type": "view_submission", "user": map[string]any{"id": user},
		"view": map[string]any{
			"id": "V1", "hash": strconv.FormatInt(time.Now().UnixNano(), 10), "callback_id": view["callback_id"],
			"private_metadata": view["private_metadata"], "state": map[string]any{"values": state},
		},
	}
}

// audit returns the run's latest audit record of action.
func (h *harness) audit(run, action string) protocol.AuditRecord {
	h.t.Helper()
	var rec protocol.AuditRecord
	natstest.WaitFor(h.t, h.svc.JetStream(), h.svc.Names().AuditStream(), h.svc.Names().Audit(refund.Name, run),
		func(rs []natstest.Received) bool {
			var r protocol.AuditRecord
			last := rs[len(rs)-1]
			if err := json.Unmarshal(last.Event.Data(), &r); err != nil || r.Action != action {
				return false
			}
			rec = r
			return true
		})
	return rec
}

func (h *harness) status(flow, run string) string {
	h.t.Helper()
	cp, err := h.svc.Client("/test").Checkpoint(h.t.Context(), flow, run)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(cp.Status)
}

func (h *harness) waitStatus(flow, run, want string) {
	h.t.Helper()
	natstest.Eventually(h.t, run+" "+want, func() bool { return h.status(flow, run) == want })
}

func TestApprovalPostedInOriginThreadAndApproved(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund(`{"slack":{"channel":"CTHREAD","threadTs":"171.2"}}`)
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if got := msg.Form.Get("channel"); got != "CTHREAD" {
		t.Errorf("posted in %q, want the origin's channel CTHREAD", got)
	}
	if got := msg.Form.Get("thread_ts"); got != "171.2" {
		t.Errorf("thread_ts %q, want the origin's 171.2", got)
	}
	blocks := msg.Form.Get("blocks")
	for _, want := range []string{"issue_refund", "$4,800.00", "Supervisor review required", "supervisor", "Decide by", "interlock_approve", "interlock_edit", "interlock_reject"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the message lacks %q: %s", want, blocks)
		}
	}
	if strings.Contains(blocks, "resumeToken") {
		t.Error("the message holds a resume token")
	}

	resp := h.send(click(supervisor, "interlock_approve", msg), time.Now(), secret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	h.waitStatus(refund.Name, run, "completed")
	rec := h.audit(run, "approved")
	if rec.By != "ann@example.com" || !rec.Trusted {
		t.Errorf("audit: by %q trusted %v, want ann@example.com, vouched", rec.By, rec.Trusted)
	}
	up := h.slack.wait(t, "chat.update", 1)[0]
	if up.Form.Get("ts") != "1700000000.000002" || up.Form.Get("channel") != "CTHREAD" {
		t.Errorf("updated %s %s, want the posted message", up.Form.Get("channel"), up.Form.Get("ts"))
	}
	if b := up.Form.Get("blocks"); !strings.Contains(b, "Approved by *ann@example.com*") || strings.Contains(b, "interlock_approve") {
		t.Errorf("updated message: %s", b)
	}
	if n := len(h.slack.of("chat.postEphemeral")); n != 0 {
		t.Errorf("%d ephemerals for an authorised decision", n)
	}
}

func TestForgedOrReplayedInteractionsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if got := msg.Form.Get("channel"); got != channelSup {
		t.Errorf("posted in %q, want the supervisor role's channel", got)
	}
	for name, resp := range map[string]*http.Response{
		"forged":   h.send(click(supervisor, "interlock_approve", msg), time.Now(), "not-the-signing-secret"),
		"replayed": h.send(click(supervisor, "interlock_approve", msg), time.Now().Add(-6*time.Minute), secret),
	} {
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, resp.StatusCode)
		}
	}
	if got := h.status(refund.Name, run); got != "waiting" {
		t.Errorf("run %s after refused interactions, want waiting", got)
	}
}

func TestUnauthorisedClickRefusedWithEphemeral(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]

	if resp := h.send(click(agent, "interlock_approve", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]
	if eph.Form.Get("user") != agent || !strings.Contains(eph.Form.Get("text"), "takes approver role supervisor") {
		t.Errorf("ephemeral to %s: %q", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	// The engine refused and audited the attempt; nothing was decided.
	if rec := h.audit(run, "refused"); rec.By != "bob@example.com" {
		t.Errorf("refusal audited as by %q", rec.By)
	}
	if resp := h.send(click(stranger, "interlock_approve", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	eph = h.slack.wait(t, "chat.postEphemeral", 2)[1]
	if eph.Form.Get("user") != stranger || !strings.Contains(eph.Form.Get("text"), "not set up") {
		t.Errorf("ephemeral to %s: %q", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	if resp := h.send(click(agent, "interlock_edit", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	h.slack.wait(t, "chat.postEphemeral", 3)
	if got := h.status(refund.Name, run); got != "waiting" {
		t.Errorf("run %s, want waiting", got)
	}
	if n := len(h.slack.of("chat.update")) + len(h.slack.of("views.open")); n != 0 {
		t.Errorf("%d updates or modals after unauthorised clicks", n)
	}
}

func TestEditThroughModal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if resp := h.send(click(supervisor, "interlock_edit", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	opened := h.slack.wait(t, "views.open", 1)[0]
	if opened.JSON["trigger_id"] != "trig-"+supervisor {
		t.Errorf("views.open trigger_id %v", opened.JSON["trigger_id"])
	}
	if in := modalInput(t, opened, "arg:amount"); in["type"] != "number_input" || in["initial_value"] != "4800" {
		t.Errorf("the modal's amount input: %v", in)
	}

	// The args schema refuses a higher amount: the refusal is shown on
	// the amount's field, the engine's message whole.
	resp := h.send(submit(supervisor, opened, map[string]string{"arg:amount": "9000"}), time.Now(), secret)
	var out struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if out.ResponseAction != "errors" || !strings.Contains(out.Errors["arg:amount"], "/amount: must be <= 4800") {
		t.Errorf("%+v, want an error on arg:amount saying /amount: must be <= 4800", out)
	}
	resp = h.send(submit(supervisor, opened, map[string]string{"arg:amount": "400", "arg:orderId": "o-1", "arg:currency": "USD", "reason": "partial"}), time.Now(), secret)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(strings.TrimSpace(string(b))) != 0 {
		t.Fatalf("submission: %d %s, want 200 and no body (the modal closes)", resp.StatusCode, b)
	}
	h.waitStatus(refund.Name, run, "completed")
	rec := h.audit(run, "edited")
	if rec.By != "ann@example.com" {
		t.Errorf("edited by %q", rec.By)
	}
	up := h.slack.wait(t, "chat.update", 1)[0]
	if b := up.Form.Get("blocks"); !strings.Contains(b, "Approved with edits by *ann@example.com*") || !strings.Contains(b, `{\"amount\":400}`) {
		t.Errorf("updated message: %s", b)
	}
}

func TestMessageUpdatedAfterDecisionElsewhereAndRestartPostsNothingTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	h.slack.wait(t, "chat.postMessage", 1)

	// The bridge stops; a decision is made over HTTP meanwhile.
	if err := h.b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := protocol.Resume{Decision: "reject", Reason: "duplicate order"}
	if _, err := h.svc.ResumeAs(t.Context(), h.svc.Client("/http/carol"), refund.Name, run, res, "carol", []string{refund.SupervisorRole}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(refund.Name, run, "completed")

	// A new bridge carries on where the first stopped.
	h.start()
	up := h.slack.wait(t, "chat.update", 1)[0]
	if b := up.Form.Get("blocks"); !strings.Contains(b, "Rejected by *carol*") || !strings.Contains(b, "duplicate order") || strings.Contains(b, "interlock_approve") {
		t.Errorf("updated message: %s", b)
	}
	// A second run, posted by the new bridge, shows it posted the first
	// one only once.
	h.refund("")
	h.slack.wait(t, "chat.postMessage", 2)
	if n := len(h.slack.of("chat.postMessage")); n != 2 {
		t.Errorf("%d messages posted for 2 runs", n)
	}
}

func TestQuestionAnsweredThroughModal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ev, err := h.svc.Client("/test").Start(t.Context(), booking.Name, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil || in.Kind != "question" {
		t.Fatalf("start: %s %v", ev.Kind, err)
	}
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if msg.Form.Get("channel") != channelDef || !strings.Contains(msg.Form.Get("blocks"), "interlock_answer") {
		t.Fatalf("question posted in %s: %s", msg.Form.Get("channel"), msg.Form.Get("blocks"))
	}
	if resp := h.send(click(agent, "interlock_answer", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	opened := h.slack.wait(t, "views.open", 1)[0]
	values := map[string]string{}
	for _, q := range in.Questions {
		values["q:"+q.Field] = "ann@example.com"
		if !strings.Contains(fmt.Sprint(opened.JSON["view"]), "q:"+q.Field) {
			t.Errorf("the modal lacks field %s", q.Field)
		}
	}
	if resp := h.send(submit(agent, opened, values), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("submission: %d", resp.StatusCode)
	}
	up := h.slack.wait(t, "chat.update", 1)[0]
	if !strings.Contains(up.Form.Get("blocks"), ":white_check_mark: Answered") {
		t.Errorf("updated message: %s", up.Form.Get("blocks"))
	}
}

func TestEscalationAndExpiryUpdateTheMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Each approval waits 1 s: the supervisor's escalates to finance_lead,
	// whose expires.
	run := h.refundWith("", map[string]json.RawMessage{"approvalTimeoutSeconds": json.RawMessage(`1`)})
	first := h.slack.wait(t, "chat.postMessage", 1)[0]
	up := h.slack.wait(t, "chat.update", 1)[0]
	if up.Form.Get("ts") != "1700000000.000002" || !strings.Contains(up.Form.Get("blocks"), "Escalated to *finance_lead*") {
		t.Errorf("first message updated to %s", up.Form.Get("blocks"))
	}
	second := h.slack.wait(t, "chat.postMessage", 2)[1]
	if second.Form.Get("channel") != channelDef || !strings.Contains(second.Form.Get("blocks"), "finance_lead") {
		t.Errorf("escalation posted in %s: %s", second.Form.Get("channel"), second.Form.Get("blocks"))
	}
	up = h.slack.wait(t, "chat.update", 2)[1]
	if up.Form.Get("ts") == first.Form.Get("ts") || !strings.Contains(up.Form.Get("blocks"), "Expired") {
		t.Errorf("second message updated to %s", up.Form.Get("blocks"))
	}
	// A click on the first, stale message changes nothing.
	if resp := h.send(click(supervisor, "interlock_approve", first), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]
	if !strings.Contains(eph.Form.Get("text"), "no longer waiting") {
		t.Errorf("ephemeral %q", eph.Form.Get("text"))
	}
	if got := h.status(refund.Name, run); got == "completed" {
		t.Errorf("an expired run completed after a stale click")
	}
}

// TestRejectAsksForTheReasonTheApprovalRequires: the refund flow's
// approval takes a reason on reject, so Reject opens a modal asking for
// one, refuses it empty, and records the reason given; no surface makes
// one up.
func TestRejectAsksForTheReasonTheApprovalRequires(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if resp := h.send(click(supervisor, "interlock_reject", msg), time.Now(), secret); resp.StatusCode != http.StatusOK {
		t.Fatalf("click: %d", resp.StatusCode)
	}
	opened := h.slack.wait(t, "views.open", 1)[0]
	if v, _ := json.Marshal(opened.JSON["view"]); !strings.Contains(string(v), "interlock_reject") || !strings.Contains(string(v), "Reason") {
		t.Fatalf("Reject opened %s, want a modal asking for the reason", v)
	}
	if h.status(refund.Name, run) != "waiting" {
		t.Fatal("a click on Reject decided before the reason was given")
	}
	resp := h.send(submit(supervisor, opened, map[string]string{"reason": "  "}), time.Now(), secret)
	var out struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.ResponseAction != "errors" || !strings.Contains(out.Errors["reason"], "Say why") {
		t.Fatalf("an empty reason: %+v %v, want an error on reason", out, err)
	}
	resp = h.send(submit(supervisor, opened, map[string]string{"reason": "not eligible"}), time.Now(), secret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submission: %d", resp.StatusCode)
	}
	h.waitStatus(refund.Name, run, "completed")
	if rec := h.audit(run, "rejected"); rec.By != "ann@example.com" || rec.Reason != "not eligible" {
		t.Errorf("rejected by %q with reason %q, want ann@example.com, not eligible", rec.By, rec.Reason)
	}
}

func TestApproveByAClickRecordsNoReasonNobodyGave(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	h.send(click(supervisor, "interlock_approve", msg), time.Now(), secret)
	h.waitStatus(refund.Name, run, "completed")
	if rec := h.audit(run, "approved"); rec.Reason != "" {
		t.Errorf("approved with reason %q, which nobody gave", rec.Reason)
	}
}

// An ask from an agent reaches Slack as a flow's approval does, with the
// conversation that led the agent to ask.
func TestAnAsksMessageShowsTheConversationBehindIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.svc.Client("/test").AskNoWait(t.Context(), protocol.AskRequest{AskID: "ask-slack", Agent: "support-bot", ConversationID: "conv-42",
		Messages: json.RawMessage(`[{"role": "user", "content": "Please rotate the billing keys"}, {"role": "assistant", "content": "I will ask a supervisor."}]`),
		Interrupt: protocol.AskInterrupt{Kind: "approval", Title: "Rotate the billing keys", Action: "rotate_keys", Args: json.RawMessage(`{"service": "billing"}`),
			ApproverRole: refund.SupervisorRole}}, 0); err != nil {
		t.Fatal(err)
	}
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	blocks := msg.Form.Get("blocks")
	for _, want := range []string{"Rotate the billing keys", "conv-42", "Please rotate the billing keys", "I will ask a supervisor."} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the ask's message lacks %q: %s", want, blocks)
		}
	}
	if got := msg.Form.Get("channel"); got != channelSup {
		t.Errorf("posted in %q, want the supervisor's channel %s", got, channelSup)
	}
}

// TestAnEventTheBridgeCannotReadIsDeadLettered: poison on the events
// stream is dead-lettered, naming the bridge's consumer, as every channel
// does, not skipped with a log line alone; the bridge carries on.
func TestAnEventTheBridgeCannotReadIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	names := h.svc.Names()
	natstest.PublishRaw(t, h.svc.JetStream(), names.Event("refund", "r-poison", protocol.EventInterrupted), []byte("{not json"), nil)
	dls := natstest.WaitFor(t, h.svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	if c := dls[0].Header.Get(bus.HeaderConsumer); c != slackbridge.ConsumerName(names) {
		t.Fatalf("the dead letter names consumer %q, want the bridge's, %s", c, slackbridge.ConsumerName(names))
	}
	if e := dls[0].Header.Get(bus.HeaderError); !strings.Contains(e, "does not decode") {
		t.Fatalf("the dead letter's error %q does not say why", e)
	}
}
