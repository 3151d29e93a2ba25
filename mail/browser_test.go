package mail_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestTheMailsHTMLRendersInChromiumWithTheButtonAndNoScript renders the
// HTML part of a hostile approval's mail in a real browser: the button
// to decide is there, and nothing of the description ran. With
// INTERLOCK_UPDATE_SCREENSHOTS=1 it saves docs/img/mail-approval.png from
// a plain refund's mail. Without Chromium it skips, but fails under
// CI=true.
func TestTheMailsHTMLRendersInChromiumWithTheButtonAndNoScript(t *testing.T) {
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
			t.Fatal("no Chromium: install the chromium package, or set INTERLOCK_CHROMIUM")
		}
		t.Skip("no Chromium on PATH (install the chromium package, or set INTERLOCK_CHROMIUM)")
	}
	e := startEnv(t, false, nil)
	hostile := "The customer was **charged twice**.\n\n<script>document.body.dataset.pwned = 'script'</script>\n\n<img src=x onerror=\"document.body.dataset.pwned = 'img'\">"
	e.start("r-shot", refundState{OrderID: "A-1001", Amount: 4800, Assignees: []string{"ann@example.com"}})
	e.start("r-evil", refundState{OrderID: "A-1002", Amount: 4800, Assignees: []string{"cat"}, Description: hostile})
	htmlTo := func(addr string) string {
		var html string
		for _, m := range e.smtpd.waitMails(2) {
			if m.To[0] == addr {
				html = parseMail(t, m.Raw).HTML
			}
		}
		return html
	}
	pages := map[string]string{"/ann": htmlTo("ann@example.com"), "/cat": htmlTo("cat@example.com")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(pages[r.URL.Path]))
	}))
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(760, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	sctx, cancelStep := context.WithTimeout(ctx, 30*time.Second)
	defer cancelStep()

	if err := chromedp.Do(sctx, chromedp.Navigate(srv.URL+"/cat"), chromedp.WaitVisible(chromedp.CSS("a[href*='/decide/']"))); err != nil {
		t.Fatal(err)
	}
	pwned, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.body.dataset.pwned || ""`))
	if err != nil || pwned != "" {
		t.Errorf("the hostile description ran: %q %v", pwned, err)
	}
	strong, err := chromedp.Run(sctx, chromedp.Evaluate[string](`(document.querySelector(".description strong") || {}).textContent || ""`))
	if err != nil || strong != "charged twice" {
		t.Errorf("the description's Markdown is not rendered: %q %v", strong, err)
	}
	if err := chromedp.Do(sctx, chromedp.Navigate(srv.URL+"/ann"), chromedp.WaitVisible(chromedp.CSS("a[href*='/decide/']"))); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("INTERLOCK_UPDATE_SCREENSHOTS") == "1" {
		img, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "mail-approval.png"), img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
