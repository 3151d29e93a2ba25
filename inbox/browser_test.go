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

	"github.com/chromedp/chromedp"
)

// stepTimeout bounds one step of a browser test.
const stepTimeout = 15 * time.Second

// startBrowser starts a headless Chromium, stopped at cleanup. Without
// one it skips, but fails under CI=true, where .ci/run installs it.
// INTERLOCK_CHROMIUM names the binary when it is not on PATH.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := os.Getenv("INTERLOCK_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if exe != "" {
			break
		}
		if p, err := exec.LookPath(name); err == nil {
			exe = p
		}
	}
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium: install the chromium package (.ci/run does), or set INTERLOCK_CHROMIUM")
		}
		t.Skip("no Chromium on PATH (install the chromium package, or set INTERLOCK_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1100, 820),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// step runs actions in the browser within stepTimeout.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		html, _ := chromedp.Run(pctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// setField sets the value of the field sel names as typing does,
// firing its input event.
func setField(sel, value string) chromedp.Action[chromedp.Void] {
	js, _ := json.Marshal(map[string]string{"sel": sel, "value": value})
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const a = %s, f = document.querySelector(a.sel);
		f.value = a.value;
		f.dispatchEvent(new Event("input", {bubbles: true}));
	})()`, js))
}

// until waits for a JavaScript predicate to hold. A poll that begins as
// the page navigates loses its JavaScript context (or its target); it is
// started again on the new page.
func until(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(stepTimeout))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			v, err := poll(ctx, t)
			if err == nil || !strings.Contains(err.Error(), "Cannot find context") && !strings.Contains(err.Error(), "navigated or closed") || ctx.Err() != nil {
				return v, err
			}
		}
	}
}

// screenshot saves the viewport as docs/img/name when
// INTERLOCK_UPDATE_SCREENSHOTS=1, so that CI leaves the tree as it is.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("INTERLOCK_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "img", name), img, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser walks the inbox in a real browser: sign in, see runs appear
// and leave live, answer a question after a failed validation, approve an edited
// refund after a refused edit, reject another with a reason, see the
// runs complete, and find them in the done view with how each ended, a
// run finishing while it is open appearing on top.
func TestBrowser(t *testing.T) {
	s := startSite(t, map[string][]string{"sam": {"supervisor"}})
	ctx := startBrowser(t)

	step(t, ctx, "sign in",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "wrong"),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#token-error")),
		until(`document.querySelector("#token-error")?.textContent.includes("No caller holds this token")`),
		chromedp.SetValue(chromedp.CSS("#token"), s.tokens["sam"]),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#queue .empty")),
	)

	// Runs started elsewhere appear in the open queue without a reload.
	start := func(run string, state map[string]any) {
		t.Helper()
		if code, out := s.api("sam", "POST", "/v1/runs/refund", map[string]any{"run": run, "state": state}); code != http.StatusAccepted {
			t.Fatalf("start %s = %d %s", run, code, out)
		}
	}
	start("r-1", map[string]any{"orderId": "o-1", "amount": 900, "currency": "USD"})
	step(t, ctx, "see r-1 arrive", chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-1"]`)))
	start("r-2", map[string]any{"orderId": "o-2", "amount": 4800, "currency": "USD", "last4": "4242", "approvalTimeoutSeconds": 1800})
	step(t, ctx, "see r-2 arrive", chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-2"] .kind-approval`)))
	// One cancelled elsewhere leaves the open queue without a reload.
	start("r-3", map[string]any{"orderId": "o-3", "amount": 700, "currency": "USD", "last4": "4242"})
	step(t, ctx, "see r-3 arrive", chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-3"]`)))
	if code, out := s.api("sam", "POST", "/v1/runs/refund/r-3/cancel", map[string]any{"reason": "customer called back"}); code != http.StatusAccepted {
		t.Fatalf("cancel r-3 = %d %s", code, out)
	}
	step(t, ctx, "see r-3 leave", until(`!document.querySelector('.item[data-run="r-3"]') && !!document.querySelector('.item[data-run="r-2"]')`))

	step(t, ctx, "fail the validation of a question",
		chromedp.Click(chromedp.CSS(`a[href="/runs/refund/r-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[id="answer.last4"]`)),
		chromedp.SendKeys(chromedp.CSS(`[id="answer.last4"]`), "12"),
		chromedp.Submit(chromedp.CSS(`[id="answer.last4"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[id="answer.last4-error"]`)),
		until(`document.getElementById("answer.last4-error")?.textContent.includes("exactly four digits")`),
	)
	step(t, ctx, "answer the question",
		chromedp.SetValue(chromedp.CSS(`[id="answer.last4"]`), "4242"),
		chromedp.Submit(chromedp.CSS(`[id="answer.last4"]`)),
		chromedp.WaitVisible(chromedp.CSS("#proposal")),
		until(`document.body.innerText.includes("Your answer was sent")`),
	)
	step(t, ctx, "see an edit refused beside the arguments",
		// The amount's field stops more than was asked for (its schema's
		// maximum); the flow's own check refuses another order.
		until(`document.getElementById("arg-amount").max === "900"`),
		setField("#arg-orderId", "o-9"),
		until(`document.querySelector("#args-diff ins")?.textContent === "o-9"`),
		chromedp.Click(chromedp.CSS("form[data-edit] button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#args-error")),
		until(`document.getElementById("args-error")?.textContent.includes("orderId cannot be changed")`),
		until(`document.getElementById("arg-orderId").value === "o-9"`),
	)
	step(t, ctx, "approve an edit",
		setField("#arg-orderId", "o-1"),
		setField("#arg-amount", "400"),
		chromedp.SendKeys(chromedp.CSS("#reason-edit"), "Partial refund agreed"),
		chromedp.Click(chromedp.CSS("form[data-edit] button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`.outcome[data-status="completed"]`)),
		until(`document.querySelector(".diff ins")?.textContent === "400" && document.querySelector(".diff del")?.textContent === "900"`),
		until(`[...document.querySelectorAll(".audit td")].some(td => td.textContent === "edited")`),
	)

	step(t, ctx, "open the other approval",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`.item[data-run="r-2"]`)),
		until(`!document.querySelector('.item[data-run="r-1"]')`),
		chromedp.Click(chromedp.CSS(`a[href="/runs/refund/r-2"]`)),
		chromedp.WaitVisible(chromedp.CSS("#proposal")),
		setField("#arg-amount", "4000"),
		until(`document.querySelector("#args-diff ins")?.textContent === "4000"`),
	)
	step(t, ctx, "reject with a reason",
		chromedp.SendKeys(chromedp.CSS("#reason-reject"), "Duplicate of o-1"),
		chromedp.Click(chromedp.CSS("button.reject")),
		chromedp.WaitVisible(chromedp.CSS(`.outcome[data-status="completed"]`)),
		until(`document.body.innerText.includes("reject by sam: Duplicate of o-1")`),
	)
	step(t, ctx, "see the queue empty",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#queue .empty")),
	)

	// The done view: what finished, newest first, and how.
	step(t, ctx, "see the finished runs and how each ended",
		chromedp.Click(chromedp.CSS(`nav.views a[href="/done"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#done tr[data-run="r-2"]`)),
		until(`[...document.querySelectorAll("#done tr.item")].map(tr => tr.dataset.run).join(",") === "r-2,r-1,r-3"`),
		until(`document.querySelector('#done tr[data-run="r-2"] .outcome-text').textContent === "rejected by sam: Duplicate of o-1"`),
		until(`document.querySelector('#done tr[data-run="r-1"] .outcome-text').textContent === "completed, edited by sam"`),
		until(`document.querySelector('#done tr[data-run="r-3"] .outcome-text').textContent.startsWith("cancelled by ")`),
	)
	// A run that finishes while the view is open appears on top without a
	// reload.
	start("r-4", map[string]any{"orderId": "o-4", "amount": 300, "currency": "USD", "last4": "4242"})
	step(t, ctx, "see r-4 finish", until(`document.querySelector("#done tr.item")?.dataset.run === "r-4"`))
	step(t, ctx, "open a finished run",
		chromedp.Click(chromedp.CSS(`#done a[href="/runs/refund/r-2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.outcome[data-status="completed"]`)),
	)
}
