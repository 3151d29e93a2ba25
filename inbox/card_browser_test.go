package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// as starts a browser of its own (its own cookies) signed in as name.
func as(t *testing.T, s *site, name string) context.Context {
	t.Helper()
	ctx := startBrowser(t)
	signIn(t, ctx, s, name)
	return ctx
}

// signIn signs in as name on the tab of ctx.
func signIn(t *testing.T, ctx context.Context, s *site, name string) {
	t.Helper()
	step(t, ctx, "sign in as "+name,
		chromedp.Navigate(s.base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), s.tokens[name]),
		chromedp.Submit(chromedp.CSS("#token")),
		until(fmt.Sprintf(`document.querySelector(".who strong")?.textContent === %q`, name)),
	)
}

// axeScript returns axe-core's script, installed from the npm registry
// with the versions testdata/axe/package-lock.json pins. Without npm the
// test skips, but fails under CI=true, where .ci/run installs it.
func axeScript(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("testdata", "axe")
	file := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(file); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no npm to install axe-core: install the npm package (.ci/run does)")
			}
			t.Skip("no npm on PATH to install axe-core")
		}
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// violation is a serious or critical finding of axe-core.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkAxe runs axe-core on the page of ctx and fails on any serious or
// critical violation.
func checkAxe(t *testing.T, ctx context.Context, script, what string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Evaluate[chromedp.Void](script)); err != nil {
		t.Fatalf("%s: injecting axe-core: %v", what, err)
	}
	vs, err := chromedp.Run(sctx, chromedp.Evaluate[[]violation](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + n.html.slice(0, 160))})))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: running axe-core: %v", what, err)
	}
	for _, v := range vs {
		t.Errorf("%s: axe-core %s (%s): %s\n\t%s", what, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
	}
}

// noSideScroll fails when the page of ctx is wider than width.
func noSideScroll(t *testing.T, ctx context.Context, width int, what string) {
	t.Helper()
	w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if w > width {
		wide, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`[...document.querySelectorAll("body *")]
			.filter(e => e.getBoundingClientRect().right > %d).slice(0, 8)
			.map(e => e.tagName + (e.id ? "#" + e.id : "") + "." + e.className).join(", ")`, width)))
		t.Errorf("%s is %d px wide at a %d px viewport, so it scrolls sideways; wider than the viewport: %s", what, w, width, wide)
	}
}

// TestBrowserTwoPersonApprovalWithAClaim: two people of the finance role
// decide a refund that takes both. Ana claims it, which keeps Ben's
// forms away, and votes; released, Ana claims it again while Ben's page
// is open, and Ben's vote is refused naming her; Ben claims it once she
// releases it, and his vote completes it. The queue says who claimed it,
// the votes so far and that it was reminded. With
// INTERLOCK_UPDATE_SCREENSHOTS=1 it saves the inbox's screenshots.
func TestBrowserTwoPersonApprovalWithAClaim(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}, "sue": {"support"}}, cardFlow())
	// Sue, who starts the two-person refund, may not vote on it.
	s.startCard("sue", "r-1042", map[string]any{"orderId": "o-1042", "amount": 4800, "approvers": 2, "remindSoon": true})
	s.startCard("ana", "r-1043", map[string]any{"orderId": "o-1043", "amount": 780, "assignees": []string{"ben"}, "customer": "lee@example.com"})
	s.startCard("ana", "r-1044", map[string]any{"orderId": "o-1044", "amount": 1250.5, "customer": "kim@example.com"})
	ana := as(t, s, "ana")
	// Ana reads in UTC+14, where the day is not UTC's: every time the
	// card shows must be hers.
	step(t, ana, "read in Pacific/Kiritimati", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Pacific/Kiritimati"})
		return err
	}))

	step(t, ana, "see the queue say what is proposed",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-1042"]`)),
		until(`document.querySelector('.item[data-run="r-1042"] .row-title').textContent === "Refund $4,800.00 on order o-1042"`),
		until(`document.querySelector('.item[data-run="r-1042"] .votes').textContent === "0 of 2 approvals"`),
		until(`document.querySelector('.item[data-run="r-1042"] .deadline').textContent.includes("then it goes to finance_lead")`),
		until(`document.querySelector('.item[data-run="r-1043"] .assigned').textContent === "for ben"`),
	)
	// The reminder falls due two seconds after the ask; its event is
	// published once the pending entry says so.
	n := s.svc.Names()
	natstest.WaitFor(t, s.svc.JetStream(), n.EventStream(), n.Event("refund", "r-1042", protocol.EventReminded),
		func(rs []natstest.Received) bool { return len(rs) > 0 })
	step(t, ana, "see it marked reminded",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-1042"] .reminded`)),
	)
	step(t, ana, "open the card",
		chromedp.Click(chromedp.CSS(`a[href="/runs/refund/r-1042"]`)),
		chromedp.WaitVisible(chromedp.CSS("#tally")),
		until(`document.querySelector("#ask").textContent === "Refund $4,800.00 on order o-1042"`),
		until(`document.querySelector(".description strong")?.textContent === "charged twice"`),
		until(`[...document.querySelectorAll("#proposal div")].some(d => d.querySelector("dt").textContent === "Amount" && d.querySelector("dd").textContent.trim() === "$4,800.00")`),
		until(`document.querySelector("#deadline .consequence").textContent === "then it goes to finance_lead"`),
		until(`document.querySelector(".requester").textContent === "support-bot"`),
		// Times are the reader's own, the UTC text kept as their title.
		until(`[...document.querySelectorAll("time[data-local]")].every(t => t.title.endsWith("UTC") && !t.textContent.includes("UTC"))`),
		until(`(() => {
			const ts = [...document.querySelectorAll("time[data-local]")];
			const as = (t, zone) => new Date(t.getAttribute("datetime")).toLocaleString([], {dateStyle: "medium", timeStyle: "short", timeZone: zone});
			return ts.length > 0 && ts.every(t => t.textContent === as(t, "Pacific/Kiritimati") && t.textContent !== as(t, "UTC"));
		})()`),
		until(`document.querySelector("#tally").textContent.includes("0 of 2 approvals")`),
		until(`document.querySelector("#tally .still").textContent.includes("not support-bot or sue:")`),
	)
	step(t, ana, "claim it",
		chromedp.Click(chromedp.CSS("#claim")),
		until(`document.querySelector("#claimed")?.textContent === "by ana (you)"`),
		until(`document.body.innerText.includes("You claimed it")`),
	)
	ben := as(t, s, "ben")
	step(t, ben, "see it claimed, with no forms",
		chromedp.Navigate(s.base+"/runs/refund/r-1042"),
		chromedp.WaitVisible(chromedp.CSS("#tally")),
		until(`document.querySelector(".conflict").textContent.includes("ana has claimed this approval")`),
		until(`!document.querySelector("button.approve") && !document.querySelector("#claim")`),
	)
	step(t, ana, "vote, which releases her claim",
		chromedp.Click(chromedp.CSS("button.approve")),
		until(`document.querySelector("#tally")?.textContent.includes("1 of 2 approvals")`),
		until(`document.querySelector("#tally .votes").textContent.includes("ana approved")`),
		until(`!document.querySelector("button.approve")`), // her vote is in
		// Her vote released her claim, for the others the quorum takes.
		until(`document.querySelector("#claimed")?.textContent === "no one yet"`),
	)
	step(t, ben, "load the page with its forms",
		chromedp.Navigate(s.base+"/runs/refund/r-1042"),
		chromedp.WaitVisible(chromedp.CSS("button.approve")),
	)
	step(t, ana, "claim it again while Ben's page is open",
		chromedp.Click(chromedp.CSS("#claim")),
		until(`document.querySelector("#claimed")?.textContent === "by ana (you)"`),
	)
	step(t, ben, "see Interlock refuse a vote while Ana holds the claim",
		chromedp.Click(chromedp.CSS("button.approve")),
		chromedp.WaitVisible(chromedp.CSS("#conflict")),
		until(`document.querySelector("#conflict").textContent.includes("claimed by ana")`),
	)
	step(t, ana, "release it", chromedp.Click(chromedp.CSS("#release")), until(`document.querySelector("#claimed")?.textContent === "no one yet"`))
	step(t, ben, "claim it",
		chromedp.Navigate(s.base+"/runs/refund/r-1042"),
		chromedp.WaitVisible(chromedp.CSS("#claim")),
		chromedp.Click(chromedp.CSS("#claim")),
		until(`document.querySelector("#claimed")?.textContent === "by ben (you)"`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(".notice")?.remove()`),
	)
	screenshot(t, ben, "inbox-approval.png")
	step(t, ana, "see Ben's claim and Ana's vote in the queue",
		chromedp.Navigate(s.base+"/"),
		until(`document.querySelector('.item[data-run="r-1042"] .claimed')?.textContent === "claimed by ben"`),
		until(`document.querySelector('.item[data-run="r-1042"] .votes').textContent === "1 of 2 approvals"`),
	)
	screenshot(t, ana, "inbox-queue.png")
	step(t, ben, "complete it with the second vote",
		chromedp.Click(chromedp.CSS("button.approve")),
		chromedp.WaitVisible(chromedp.CSS(`.outcome[data-status="completed"]`)),
		until(`document.body.innerText.includes("approve by ben")`),
	)
	if code, out := s.api("ana", "GET", "/v1/runs/refund/r-1042", nil); code != http.StatusOK || !strings.Contains(string(out), `"paid":4800`) {
		t.Fatalf("the refund after two votes: %d %s", code, out)
	}
	if code, out := s.api("ana", "POST", "/v1/runs/refund/r-1044/resume", map[string]any{"decision": "reject", "reason": "duplicate of o-1042"}); code != http.StatusAccepted {
		t.Fatalf("reject r-1044 = %d %s", code, out)
	}
	if code, out := s.api("ben", "POST", "/v1/runs/refund/r-1043/resume", map[string]any{"decision": "approve"}); code != http.StatusAccepted {
		t.Fatalf("approve r-1043 = %d %s", code, out)
	}
	step(t, ana, "see them done",
		chromedp.Navigate(s.base+"/done"),
		until(`[...document.querySelectorAll("#done tr.item")].map(tr => tr.dataset.run).join(",") === "r-1043,r-1044,r-1042"`),
	)
	screenshot(t, ana, "inbox-done.png")
}

// TestBrowserDelegateRespondAndAHostileDescription: Ana hands a refund
// to Ben, who finds it among his own and hands it to a role he does not
// hold; Ana answers another with a message instead of a decision; a
// description written to run script shows as harmless text.
func TestBrowserDelegateRespondAndAHostileDescription(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	s.startCard("ana", "r-2", map[string]any{"orderId": "o-2", "amount": 600})
	s.startCard("ana", "r-evil", map[string]any{"orderId": "o-3", "amount": 700, "description": hostileDescription})
	ana := as(t, s, "ana")

	step(t, ana, "delegate to a person",
		chromedp.Navigate(s.base+"/runs/refund/r-1"),
		chromedp.WaitVisible(chromedp.CSS(".delegate summary")),
		chromedp.Click(chromedp.CSS(".delegate summary")),
		chromedp.WaitVisible(chromedp.CSS("#delegate-to")),
		chromedp.Click(chromedp.CSS(`input[name="toKind"][value="person"]`)),
		chromedp.SendKeys(chromedp.CSS("#delegate-to"), "ben"),
		chromedp.SendKeys(chromedp.CSS("#delegate-reason"), "Ben handled the ticket"),
		chromedp.Submit(chromedp.CSS("#delegate-to")),
		until(`document.body.innerText.includes("You handed it on")`),
		until(`[...document.querySelectorAll(".people div")].some(d => d.textContent.includes("Assigned to") && d.textContent.includes("ben"))`),
		until(`document.body.innerText.includes("delegated by ana to ben: Ben handled the ticket")`),
	)
	ben := as(t, s, "ben")
	step(t, ben, "find it among his own",
		chromedp.Navigate(s.base+"/?view=mine"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-1"]`)),
		until(`document.querySelectorAll(".item").length === 1`),
		until(`document.querySelector('.tabs a[aria-current="page"]').textContent === "Mine 1"`),
	)
	step(t, ben, "delegate to a role",
		chromedp.Click(chromedp.CSS(`a[href="/runs/refund/r-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(".delegate summary")),
		chromedp.Click(chromedp.CSS(".delegate summary")),
		chromedp.Click(chromedp.CSS(`input[name="toKind"][value="role"]`)),
		chromedp.SendKeys(chromedp.CSS("#delegate-to"), "finance_lead"),
		chromedp.Submit(chromedp.CSS("#delegate-to")),
		until(`document.body.innerText.includes("You handed it on")`),
		until(`[...document.querySelectorAll(".people div")].some(d => d.textContent.includes("Role") && d.textContent.includes("finance_lead"))`),
		until(`document.querySelector(".conflict")?.textContent.includes("the role finance_lead, which you do not hold")`),
		until(`!document.querySelector("button.approve")`),
	)
	step(t, ben, "see a bad delegation refused beside its field",
		chromedp.Navigate(s.base+"/runs/refund/r-2"),
		chromedp.WaitVisible(chromedp.CSS(".delegate summary")),
		chromedp.Click(chromedp.CSS(".delegate summary")),
		chromedp.Click(chromedp.CSS(`input[name="toKind"][value="role"]`)),
		chromedp.SendKeys(chromedp.CSS("#delegate-to"), "no such role!"),
		chromedp.Submit(chromedp.CSS("#delegate-to")),
		chromedp.WaitVisible(chromedp.CSS("#delegate-to-error")),
		until(`document.querySelector("#delegate-to").value === "no such role!"`),
	)

	step(t, ana, "respond instead of deciding",
		chromedp.Navigate(s.base+"/runs/refund/r-2"),
		chromedp.WaitVisible(chromedp.CSS("#message")),
		chromedp.Click(chromedp.CSS("form[data-respond] button")),
		chromedp.WaitVisible(chromedp.CSS("#message-error")),
		chromedp.SendKeys(chromedp.CSS("#message"), "Ask the customer for the receipt first."),
		chromedp.Click(chromedp.CSS("form[data-respond] button")),
		chromedp.WaitVisible(chromedp.CSS(`.outcome[data-status="completed"]`)),
		until(`document.body.innerText.includes("review: respond by ana")`),
	)
	if code, out := s.api("ana", "GET", "/v1/runs/refund/r-2", nil); code != http.StatusOK ||
		!strings.Contains(string(out), `"message":"Ask the customer for the receipt first."`) || strings.Contains(string(out), `"paid"`) {
		t.Fatalf("after the response the run is %d %s, want the message and no refund", code, out)
	}

	step(t, ana, "see a hostile description do nothing",
		chromedp.Navigate(s.base+"/runs/refund/r-evil"),
		chromedp.WaitVisible(chromedp.CSS(".description")),
		until(`document.querySelector(".description strong")?.textContent === "now"`),
		until(`document.body.dataset.pwned === undefined`),
		until(`document.querySelectorAll(".description script, .description iframe, .description div, .description [style]").length === 0`),
		until(`[...document.querySelectorAll("main *")].every(e => ![...e.attributes].some(a => a.name.startsWith("on")))`),
		until(`[...document.querySelectorAll(".description a")].every(a => a.protocol === "https:")`),
		until(`[...document.querySelectorAll(".description img")].every(i => !i.getAttribute("src")?.startsWith("javascript"))`),
	)
	// Clicking each link the description kept runs nothing either.
	step(t, ana, "click the description's links",
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(".description a").forEach(a => { a.target = ""; a.addEventListener("click", e => e.preventDefault()); a.click(); })`),
		until(`document.body.dataset.pwned === undefined`),
	)
}

// TestBrowserAtPhoneWidthWithNoSideScrollAndNoSeriousAxeViolations: at
// 390 px the queue, an approval card with every part and the done view
// fit the screen; axe-core finds nothing serious or critical on them, nor
// on the sign-in page.
func TestBrowserAtPhoneWidthWithNoSideScrollAndNoSeriousAxeViolations(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}, "sue": {"support"}}, cardFlow())
	s.startCard("sue", "r-1042", map[string]any{"orderId": "o-1042-with-a-long-unbroken-reference-number-0123456789", "amount": 4800, "approvers": 2,
		"customer": "a.very.long.address.of.a.customer@subdomain.example.com"})
	s.startCard("ana", "r-1043", map[string]any{"orderId": "o-1043", "amount": 780, "assignees": []string{"ben"}})
	s.startCard("ana", "r-1044", map[string]any{"orderId": "o-1044", "amount": 90})
	if code, out := s.api("ana", "POST", "/v1/runs/refund/r-1044/resume", map[string]any{"decision": "reject", "reason": "duplicate"}); code != http.StatusAccepted {
		t.Fatalf("reject r-1044 = %d %s", code, out)
	}
	script := axeScript(t)
	browser := startBrowser(t)
	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	step(t, browser, "the sign-in page", chromedp.Navigate(s.base+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")))
	noSideScroll(t, browser, 390, "the sign-in page")
	checkAxe(t, browser, script, "the sign-in page")
	signIn(t, browser, s, "ana")

	step(t, browser, "the queue",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-1043"]`)),
	)
	noSideScroll(t, browser, 390, "the queue")
	checkAxe(t, browser, script, "the queue")

	step(t, browser, "an approval card, its delegation open and an edit refused",
		chromedp.Navigate(s.base+"/runs/refund/r-1042"),
		chromedp.WaitVisible(chromedp.CSS("#claim")),
		chromedp.Click(chromedp.CSS("#claim")),
		until(`document.querySelector("#claimed")?.textContent === "by ana (you)"`),
		setField("#arg-amount", "20000"),
		// The field's max stops the browser from sending it; past that,
		// Interlock refuses it naming the argument.
		until(`!document.querySelector("#arg-amount").checkValidity()`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("form[data-edit]").noValidate = true`),
		chromedp.Click(chromedp.CSS("form[data-edit] button[type=submit]")),
		until(`document.querySelector("#arg-amount-error:not([hidden])")?.textContent.includes("Amount must be at most")`),
		chromedp.Click(chromedp.CSS(".delegate summary")),
		chromedp.WaitVisible(chromedp.CSS("#delegate-to")),
	)
	noSideScroll(t, browser, 390, "the approval page")
	checkAxe(t, browser, script, "the approval page")

	step(t, browser, "the done view",
		chromedp.Navigate(s.base+"/done"),
		chromedp.WaitVisible(chromedp.CSS(`#done tr[data-run="r-1044"]`)),
	)
	noSideScroll(t, browser, 390, "the done view")
	checkAxe(t, browser, script, "the done view")
}

// TestBrowserAGateRunsCardWithItsConversationFitsAPhoneAndPassesAxe: a
// tool call's card with a long conversation behind it (a long message
// folded, an unbroken link) fits 390 px with the long message open, and
// axe-core finds nothing serious or critical on it, at phone and desktop
// width.
func TestBrowserAGateRunsCardWithItsConversationFitsAPhoneAndPassesAxe(t *testing.T) {
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	s := startSiteWith(t, map[string][]string{"sam": {"supervisor"}}, interlock.Config{Flows: []*engine.Flow{cardFlow()}, GateRules: rules})
	long := "Here is the whole story. " + strings.Repeat("The parcel never came and the courier says it was delivered. ", 12) +
		"Tracking: https://courier.example.com/track/" + strings.Repeat("0123456789", 12)
	msgs, _ := json.Marshal([]map[string]any{
		{"role": "user", "content": "I was charged twice for order o-9, please refund one."},
		{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "Let me check the charges."}}},
		{"role": "user", "content": long},
	})
	req := protocol.ToolRequest{CallID: "call-9", Tool: "issue_refund", Agent: "support-bot", ConversationID: "conv-9",
		Args: map[string]json.RawMessage{"amount": json.RawMessage("900"), "currency": json.RawMessage(`"USD"`), "orderId": json.RawMessage(`"o-9"`)}, Messages: msgs}
	if _, err := s.svc.Client("/test").AskTool(t.Context(), req, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	script := axeScript(t)
	browser := startBrowser(t)
	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	signIn(t, browser, s, "sam")
	step(t, browser, "the tool call's card, its long message open",
		chromedp.Navigate(s.base+"/runs/gate/call-9"),
		chromedp.WaitVisible(chromedp.CSS("#conversation-h")),
		chromedp.Click(chromedp.CSS(".conversation details summary")),
		until(`document.querySelector(".conversation details").open`),
	)
	noSideScroll(t, browser, 390, "the tool call's card")
	checkAxe(t, browser, script, "the tool call's card at 390 px")
	step(t, browser, "a desktop's viewport", chromedp.EmulateViewport(1280, 900))
	checkAxe(t, browser, script, "the tool call's card at 1280 px")
}

// TestBrowserAnApprovalIsDecidedFromItsFirstScreen: at 1280 px a tool
// call's page has its title as the heading, and what it proposes, the
// conversation behind it (open), the context the agent sent and the
// actions all within the first screen, beside one another; at 390 px the
// proposal and the folded conversation come above the actions, and
// nothing scrolls sideways. The reason is said once; axe-core finds
// nothing serious at either width.
func TestBrowserAnApprovalIsDecidedFromItsFirstScreen(t *testing.T) {
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	s := startSiteWith(t, map[string][]string{"sam": {"supervisor"}}, interlock.Config{Flows: []*engine.Flow{cardFlow()}, GateRules: rules})
	msgs, _ := json.Marshal([]map[string]any{
		{"role": "user", "content": "I was charged twice for order o-1042, please refund one."},
		{"role": "assistant", "content": "Let me look at the order."},
		{"role": "tool", "content": `{"order": "o-1042", "charges": 2, "total": "$4,800.00", "refundable": true}`},
		{"role": "assistant", "content": "Both charges went through: I will refund one."},
	})
	req := protocol.ToolRequest{CallID: "call-1042", Tool: "issue_refund", Agent: "support-bot", ConversationID: "conv-1042",
		Args:     map[string]json.RawMessage{"amount": json.RawMessage("4800"), "currency": json.RawMessage(`"USD"`), "orderId": json.RawMessage(`"o-1042"`)},
		Messages: msgs, Context: json.RawMessage(`{"customer": "Ada Lovelace", "tier": "gold"}`)}
	if _, err := s.svc.Client("/test").AskTool(t.Context(), req, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	script := axeScript(t)
	browser := startBrowser(t)
	step(t, browser, "a desktop's viewport", chromedp.EmulateViewport(1280, 800))
	signIn(t, browser, s, "sam")
	step(t, browser, "the tool call's page", chromedp.Navigate(s.base+"/runs/gate/call-1042"), chromedp.WaitVisible(chromedp.CSS("h1#ask")))
	heading := eval[string](t, browser, `document.querySelector("h1#ask").innerText`)
	reasons := eval[int](t, browser, `document.querySelector("section.interrupt").innerText.split("Refunds over $500 need a supervisor's approval").length - 1`)
	open := eval[bool](t, browser, `document.querySelector(".conversation details.talk").open`)
	tops := eval[map[string]float64](t, browser, `Object.fromEntries([["proposal", "#proposal"], ["conversation", "#conversation-h"],
		["approve", "button.approve"], ["reject", "button.reject"]].map(([k, sel]) => [k, document.querySelector(sel).getBoundingClientRect().top]))`)
	if shown := eval[bool](t, browser, `!!document.querySelector("#context-h") && !!document.querySelector(".tool-fields") && document.querySelector(".context").innerText.includes("Ada Lovelace")`); !shown {
		t.Error("the context the agent sent, or the tool's result as fields, is not on the page")
	}
	if squeezed := eval[bool](t, browser, `[...document.querySelectorAll(".audit th")].some(th => th.getBoundingClientRect().height > 50)`); squeezed {
		t.Error("the audit table's headings wrap at 1280 px")
	}
	if heading != "Refund $4,800.00 on order o-1042" {
		t.Errorf("the heading is %q, want the call's title", heading)
	}
	if reasons != 1 {
		t.Errorf("the reason is said %d times, want once", reasons)
	}
	if !open {
		t.Error("the conversation is folded on a wide screen")
	}
	for part, top := range tops {
		if top <= 0 || top >= 800 {
			t.Errorf("%s is at %.0f px, outside the first screen (800 px) at 1280 px", part, top)
		}
	}
	if tops["approve"] >= tops["conversation"]+400 {
		t.Errorf("the actions (%.0f px) are not beside the conversation (%.0f px)", tops["approve"], tops["conversation"])
	}
	screenshot(t, browser, "inbox-approval-1280.png")
	checkAxe(t, browser, script, "the approval at 1280 px")

	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(s.base+"/runs/gate/call-1042"), chromedp.WaitVisible(chromedp.CSS("h1#ask")))
	open = eval[bool](t, browser, `document.querySelector(".conversation details.talk").open`)
	tops = eval[map[string]float64](t, browser, `Object.fromEntries([["proposal", "#proposal"], ["conversation", "#conversation-h"], ["approve", "button.approve"]].map(([k, sel]) => [k, document.querySelector(sel).getBoundingClientRect().top]))`)
	if open {
		t.Error("the conversation is open on a phone, pushing the actions down")
	}
	if !(tops["proposal"] < tops["conversation"] && tops["conversation"] < tops["approve"]) {
		t.Errorf("at 390 px the proposal (%.0f), the conversation (%.0f) and the actions (%.0f) are not in that order", tops["proposal"], tops["conversation"], tops["approve"])
	}
	noSideScroll(t, browser, 390, "the approval")
	screenshot(t, browser, "inbox-approval-390.png")
	checkAxe(t, browser, script, "the approval at 390 px")
}

// eval is the value of the JavaScript expr in the page of ctx.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// TestBrowserTheQueuesFiltersApplyWithoutAButton: the order and the
// search apply as they change; the filter button is for pages without
// the script.
func TestBrowserTheQueuesFiltersApplyWithoutAButton(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "bot": nil}, cardFlow())
	s.startCard("bot", "r-later", map[string]any{"orderId": "o-1", "amount": 900, "timeoutMinutes": 50})
	s.startCard("bot", "r-soon", map[string]any{"orderId": "o-77", "amount": 1200, "timeoutMinutes": 10})
	browser := startBrowser(t)
	signIn(t, browser, s, "ana")
	step(t, browser, "the queue, soonest deadline first, its button hidden",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-soon"]`)),
		until(`document.querySelector(".item").dataset.run === "r-soon" && document.querySelector("form.filters button.apply").hidden`),
	)
	step(t, browser, "oldest first, as soon as it is picked",
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#sort"); s.value = "oldest"; s.dispatchEvent(new Event("change")); })()`),
		until(`location.search.includes("sort=oldest") && document.querySelector(".item") && document.querySelector(".item").dataset.run === "r-later"`),
	)
	step(t, browser, "a search, once typing pauses",
		chromedp.SendKeys(chromedp.CSS("#q"), "o-77"),
		until(`location.search.includes("q=o-77") && document.querySelectorAll(".item").length === 1 && document.querySelector(".item").dataset.run === "r-soon"`),
	)
}

// TestBrowserKeysMoveSelectAndDecide: in the queue j moves to a row and
// x selects it, and Approve selected decides the selection; on a
// request's page a brings Approve and Enter sends it. The keys are shown
// on the page.
func TestBrowserKeysMoveSelectAndDecide(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "bot": nil}, cardFlow())
	s.startCard("bot", "r-a", map[string]any{"orderId": "o-a", "amount": 900, "timeoutMinutes": 10})
	s.startCard("bot", "r-b", map[string]any{"orderId": "o-b", "amount": 900, "timeoutMinutes": 20})
	s.startCard("bot", "r-c", map[string]any{"orderId": "o-c", "amount": 900, "timeoutMinutes": 30})
	browser := startBrowser(t)
	signIn(t, browser, s, "ana")
	step(t, browser, "the queue, its keys shown",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-c"]`)),
		until(`document.querySelector("#keys").innerText.includes("x select") && document.querySelector("#bulk-approve").disabled`),
	)
	key := func(k string) chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(k) }
	step(t, browser, "j, x on the first row; j, j, x on the third",
		key("j"), until(`document.activeElement.closest(".item").dataset.run === "r-a"`), key("x"),
		key("j"), key("j"), until(`document.activeElement.closest(".item").dataset.run === "r-c"`), key("x"),
		until(`document.querySelector("#bulk-count").innerText.startsWith("2 selected") && !document.querySelector("#bulk-approve").disabled`),
	)
	step(t, browser, "approve the selection",
		chromedp.Click(chromedp.CSS("#bulk-approve")),
		chromedp.WaitVisible(chromedp.CSS("#bulk-h")),
		until(`document.querySelector("#bulk-h").innerText === "Approved 2 of 2"`),
	)
	step(t, browser, "r-b's page: a brings Approve, Enter sends it",
		chromedp.Navigate(s.base+"/runs/refund/r-b"),
		chromedp.WaitVisible(chromedp.CSS("button.approve")),
		until(`document.querySelector("button.approve kbd").innerText === "a"`),
		key("a"),
		until(`document.activeElement.matches("button.approve")`),
		chromedp.KeyEvent("\r"),
		until(`document.body.innerText.includes("Your decision was sent")`),
	)
	for _, run := range []string{"r-a", "r-b", "r-c"} {
		natstest.Eventually(t, run+" approved by ana", func() bool {
			cp, err := s.svc.Client("/test").Checkpoint(t.Context(), "refund", run)
			return err == nil && len(cp.Decisions) == 1 && cp.Decisions[0].Approver == "ana"
		})
	}
}

// TestBrowserTheTeamPageFitsAPhoneAndPassesAxe: the team page, for an
// auditor, fits 390 px and axe-core finds nothing serious at 390 and 1280
// px.
func TestBrowserTheTeamPageFitsAPhoneAndPassesAxe(t *testing.T) {
	s := startSiteWith(t, map[string][]string{"ana": {"finance"}, "aud": {"audit"}, "bot": nil},
		interlock.Config{Flows: []*engine.Flow{cardFlow()}, ReadRoles: []string{"audit"}})
	s.startCard("bot", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	s.startCard("bot", "r-2", map[string]any{"orderId": "o-2", "amount": 1900})
	if code, out := s.api("ana", "POST", "/v1/runs/refund/r-1/resume", map[string]any{"decision": "approve"}); code >= 300 {
		t.Fatalf("ana's approval = %d %s", code, out)
	}
	script := axeScript(t)
	browser := startBrowser(t)
	step(t, browser, "a desktop's viewport", chromedp.EmulateViewport(1280, 900))
	signIn(t, browser, s, "aud")
	step(t, browser, "the team page",
		chromedp.Navigate(s.base+"/team"),
		chromedp.WaitVisible(chromedp.CSS("#by-approver")),
		until(`document.querySelector("#waiting-now").innerText === "1"`),
	)
	screenshot(t, browser, "inbox-team.png")
	checkAxe(t, browser, script, "the team page at 1280 px")
	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(s.base+"/team"), chromedp.WaitVisible(chromedp.CSS("#by-approver")))
	noSideScroll(t, browser, 390, "the team page")
	checkAxe(t, browser, script, "the team page at 390 px")
}

// TestBrowserTheAwayPageSetsAnAbsenceOnAPhone: on a phone, a person names
// a delegate on the away page and sees the absence in force; the page
// fits 390 px and axe-core finds nothing serious, before and after.
func TestBrowserTheAwayPageSetsAnAbsenceOnAPhone(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ann": {"finance", "legal"}, "ben": nil}, cardFlow())
	script := axeScript(t)
	browser := startBrowser(t)
	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	signIn(t, browser, s, "ann")
	step(t, browser, "the away page",
		chromedp.Navigate(s.base+"/away"),
		chromedp.WaitVisible(chromedp.CSS("#away-form")),
	)
	noSideScroll(t, browser, 390, "the away page")
	checkAxe(t, browser, script, "the away page at 390 px")
	step(t, browser, "naming ben until the day after tomorrow",
		chromedp.SetValue(chromedp.CSS("#delegate"), "ben"),
		chromedp.SetValue(chromedp.CSS("#to"), time.Now().Add(48*time.Hour).UTC().Format("2006-01-02T15:04")),
		chromedp.Click(chromedp.CSS(`input[name="role"][value="finance"]`)),
		chromedp.Click(chromedp.CSS(`#away-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#mine")),
		until(`document.querySelector("#mine").innerText.includes("ben") && document.querySelector("#mine").innerText.includes("finance")`),
	)
	screenshot(t, browser, "inbox-away.png")
	noSideScroll(t, browser, 390, "the away page with an absence in force")
	checkAxe(t, browser, script, "the away page with an absence at 390 px")
	if ab, _, ok := s.svc.Away().Of("ann", time.Now()); !ok || ab.Delegate != "ben" || len(ab.Roles) != 1 || ab.Roles[0] != "finance" {
		t.Errorf("ann's absence after the form: %+v (in force: %v)", ab, ok)
	}
}
