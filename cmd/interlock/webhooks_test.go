package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
)

// hookSecret is a Standard Webhooks secret for the tests.
var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("cli-test-secret-0123456789abcdef"))

func writeHooks(t *testing.T, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "webhooks.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestServeDeliversWebhooksAndTheCommandsShowThem(t *testing.T) {
	t.Setenv("TEST_HOOK_SECRET", hookSecret)
	var mu sync.Mutex
	var bodies []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	file := writeHooks(t, "subscriptions:\n  - name: crm\n    url: "+rcv.URL+"/hook?key=URLSECRET\n    secretEnv: TEST_HOOK_SECRET\n    events: [interrupted]\n    flows: [booking]\n")
	url := serveForTest(t, "--webhooks", file, "--egress-allow", "127.0.0.1")
	if out, errOut, err := run(t, url, "start", "booking", "--run", "r-hook", "name=Ann"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	var out string
	natstest.Eventually(t, "the delivery listed", func() bool {
		var err error
		out, _, err = run(t, url, "webhooks", "deliveries", "--subscription", "crm", "--status", "delivered")
		return err == nil && strings.Contains(out, "crm")
	})
	if !strings.Contains(out, "LAST ATTEMPT") || !regexpMatch(`crm\s+delivered\s+1\s+204\s+run.interrupted\s+booking/r-hook\s+msg_`, out) {
		t.Fatalf("webhooks deliveries:\n%s", out)
	}
	mu.Lock()
	got := strings.Join(bodies, "\n")
	mu.Unlock()
	if !strings.Contains(got, `"run":"r-hook"`) || strings.Contains(strings.ToLower(got), "resumetoken") {
		t.Fatalf("the receiver got %s; want the interrupt without its resume token", got)
	}
	if _, _, err := run(t, url, "webhooks", "list"); err == nil || !strings.Contains(err.Error(), "only the admin user") {
		t.Fatalf("webhooks list as a client: %v; want it refused, the subscriptions holding their secrets", err)
	}
	out, _, err := run(t, url, "webhooks", "list", "--file", file)
	if err != nil || !regexpMatch(`crm\s+http://127\.0\.0\.1:\d+/hook\?redacted\s+interrupted\s+booking\s+all\s+env TEST_HOOK_SECRET\s+24h0m0s\s+10s`, out) {
		t.Fatalf("webhooks list: %v\n%s", err, out)
	}
	if strings.Contains(out, "URLSECRET") || strings.Contains(out, hookSecret) {
		t.Fatalf("webhooks list shows a credential:\n%s", out)
	}
	out, _, err = run(t, url, "webhooks", "deliveries", "--status", "dead", "--json")
	var page struct {
		Deliveries []json.RawMessage `json:"deliveries"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || page.Deliveries == nil || len(page.Deliveries) != 0 {
		t.Fatalf("webhooks deliveries --status dead --json: %v\n%s", err, out)
	}
}

func TestServeRefusesABadWebhooksFileSayingWhatToFix(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown kind", "subscriptions:\n  - name: crm\n    url: https://crm.example.com/h\n    secretEnv: SOME_SECRET\n    events: [approved]\n",
			`line 5: subscription crm: events: "approved" is not an event kind; use: started, interrupted`},
		{"secret not set", "subscriptions:\n  - name: crm\n    url: https://crm.example.com/h\n    secretEnv: NO_SUCH_HOOK_SECRET\n    events: [interrupted]\n",
			"subscription crm: secretEnv NO_SUCH_HOOK_SECRET is not set in this process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeHooks(t, tc.yaml)
			var stdout, stderr bytes.Buffer
			err := Run(t.Context(), []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync",
				"--http", "", "--metrics", "", "--log-level", "error", "--webhooks", file}, &stdout, &stderr)
			if code := codeOf(err); code != exitUsage || !strings.Contains(err.Error(), "--webhooks: webhooks "+file+": ") && tc.name == "unknown kind" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve --webhooks with %s: exit %d, %v; want %d saying %q", tc.name, code, err, exitUsage, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("serve printed %q before refusing", stdout.String())
			}
		})
	}
}

func TestWebhooksCommandRefusesAnUnknownStatus(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), []string{"webhooks", "deliveries", "--status", "lost", "--nats-url", "nats://127.0.0.1:1"}, io.Discard, io.Discard)
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), `--status "lost": use delivered, retrying, dead`) {
		t.Fatalf("webhooks deliveries --status lost: %v", err)
	}
}

func regexpMatch(pattern, text string) bool { return regexp.MustCompile(pattern).MatchString(text) }

// TestAWebhooksCallbackURLSettlesTheInterruptOnceAsItsPerson: a
// subscription with callbacks hands its receiver a single-use URL in each
// interrupted payload, which decides as the directory's person the
// subscription names, and a second POST is refused.
func TestAWebhooksCallbackURLSettlesTheInterruptOnceAsItsPerson(t *testing.T) {
	t.Setenv("TEST_HOOK_SECRET", hookSecret)
	urls := make(chan string, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			CallbackURL string `json:"callbackUrl"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		if p.CallbackURL != "" {
			urls <- p.CallbackURL
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	dir := filepath.Join(t.TempDir(), "people.yaml")
	if err := os.WriteFile(dir, []byte("people:\n  - name: pager-bot\n    roles: [supervisor]\n    tokenSha256: "+strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeHooks(t, "subscriptions:\n  - name: pager\n    url: "+rcv.URL+"/hook\n    secretEnv: TEST_HOOK_SECRET\n    events: [interrupted]\n    flows: [refund]\n"+
		"    callbacks: true\n    callbacksAs: pager-bot\n")
	url := serveForTest(t, "--webhooks", file, "--people", dir, "--egress-allow", "127.0.0.1")
	if out, errOut, err := run(t, url, "start", "refund", "--run", "r-cb", "orderId=o-1", "amount:=4800", "last4=4242"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	var cb string
	select {
	case cb = <-urls:
	case <-time.After(natstest.Wait):
		t.Fatal("no interrupted payload with a callbackUrl reached the receiver")
	}
	if !strings.Contains(cb, "/v1/callbacks/") {
		t.Fatalf("callbackUrl %q", cb)
	}
	post := func() (int, string) {
		resp, err := http.Post(cb, "application/json", strings.NewReader(`{"decision":"approve","reason":"paged and checked"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(); code != http.StatusAccepted {
		t.Fatalf("first POST of the callback URL: %d %s", code, body)
	}
	if code, body := post(); code != http.StatusConflict || !strings.Contains(body, "already used") {
		t.Fatalf("second POST of the callback URL: %d %s, want 409 already used", code, body)
	}
	out, errOut, err := run(t, url, "audit", "refund", "r-cb")
	if err != nil || !strings.Contains(out, "approved") || !strings.Contains(out, "pager-bot") {
		t.Fatalf("audit: %v\n%s%s", err, out, errOut)
	}
}
