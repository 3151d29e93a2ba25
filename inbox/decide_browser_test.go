package inbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/interlockhq/interlock/protocol"
)

// TestBrowserDecisionLink opens a mailed decision link in Chromium with
// no sign-in: the page shows the proposal, axe-core finds nothing serious
// on it at a desktop's width or a phone's (where it does not scroll
// sideways), a refused edit is shown beside its field, and approve
// decides, audited as the link's person; opened again, the link says it
// was used and by whom. With INTERLOCK_UPDATE_SCREENSHOTS=1 it saves the
// page's screenshots.
func TestBrowserDecisionLink(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1042", map[string]any{"orderId": "o-1042", "amount": 4800})
	link := s.base + s.decisionLink("r-1042", "ana", time.Time{})
	script := axeScript(t)
	browser := startBrowser(t)

	step(t, browser, "open the link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#proposal")),
		until(`document.querySelector("#ask").textContent === "Refund $4,800.00 on order o-1042"`),
		until(`document.querySelector("#person").textContent === "ana"`),
		until(`document.querySelector("#deadline .consequence").textContent === "then it goes to finance_lead"`),
		until(`!document.querySelector("#claim") && !document.querySelector(".who")`),
	)
	checkAxe(t, browser, script, "the decision page")
	screenshot(t, browser, "decide-page.png")

	step(t, browser, "see an edit refused beside its field",
		setField("#arg-amount", "20000"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#arg-amount").removeAttribute("max")`),
		chromedp.Click(chromedp.CSS("form[data-edit] button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#args-error")),
		until(`document.getElementById("args-error").textContent.includes("10000")`),
	)
	step(t, browser, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#proposal")))
	noSideScroll(t, browser, 390, "the decision page")
	checkAxe(t, browser, script, "the decision page at 390 px")
	screenshot(t, browser, "decide-page-390.png")

	step(t, browser, "approve",
		chromedp.SendKeys(chromedp.CSS("#reason-approve"), "Checked against the ticket"),
		chromedp.Click(chromedp.CSS("button.approve")),
		chromedp.WaitVisible(chromedp.CSS(`#outcome[data-state="done"]`)),
		until(`document.querySelector("#outcome").textContent === "You approved “Refund $4,800.00 on order o-1042”"`),
	)
	checkAxe(t, browser, script, "the outcome page")
	screenshot(t, browser, "decide-done-390.png")
	recs, err := s.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-1042")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		found = found || r.Action == protocol.ActionApproved && r.By == "ana" && r.Reason == "Checked against the ticket"
	}
	if !found {
		t.Errorf("audit %+v: want the approval by ana", recs)
	}
	step(t, browser, "open the used link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`#outcome[data-state="used"]`)),
		until(fmt.Sprintf(`document.querySelector("#detail").textContent.includes(%q)`, "Already approved by ana")),
	)
}
