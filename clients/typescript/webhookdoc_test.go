//go:build unix

package typescript_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/webhook"
)

// TestTheDocsJavaScriptVerifierTakesInterlocksWebhooks runs the receiver
// docs/channels.md shows in JavaScript (the standardwebhooks package) as
// written, on another port, and delivers it webhooks signed as Interlock
// signs them: a signed one is taken (204, printed once, a repeat not
// again), a tampered or unsigned one refused (401).
func TestTheDocsJavaScriptVerifierTakesInterlocksWebhooks(t *testing.T) {
	node, _ := requireNode(t)
	if _, err := os.Stat("node_modules/standardwebhooks"); err != nil {
		t.Fatal("clients/typescript/node_modules/standardwebhooks is missing: run npm ci in clients/typescript")
	}
	doc, err := os.ReadFile("../../docs/channels.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "#### Verifying in JavaScript")
	m := regexp.MustCompile("(?s)```js\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal(`docs/channels.md has no js block under "Verifying in JavaScript"`)
	}
	port := freePort(t)
	if strings.Contains(m[1], ".listen(8080") {
		t.Fatal("the JavaScript receiver listens on 8080, Interlock's own port: a newcomer running both gets EADDRINUSE")
	}
	src := strings.Replace(m[1], `.listen(8787, "127.0.0.1")`, fmt.Sprintf(".listen(%d, \"127.0.0.1\")", port), 1)
	if src == m[1] {
		t.Fatal(`the JavaScript receiver no longer listens on 8787, "127.0.0.1": teach this test where it listens`)
	}
	// Beside node_modules, so that the import resolves as in a project.
	f, err := os.CreateTemp(".", ".webhook-receiver-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, node, f.Name())
	cmd.Env = append(os.Environ(), "INTERLOCK_WEBHOOK_SECRET=whsec_"+base64.StdEncoding.EncodeToString(key))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		for range lines {
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	natstest.Eventually(t, "the JavaScript receiver listening", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})

	body := []byte(`{"type":"io.interlock.run.interrupted","timestamp":"2026-11-27T10:00:00Z","eventId":"e-1","flow":"refund","run":"r-42","data":{"kind":"approval","action":"issue_refund"}}`)
	deliver := func(id string, body []byte, signed bool) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", fmt.Sprint(at.Unix()))
		if signed {
			req.Header.Set("webhook-signature", webhook.Sign(key, id, at, body))
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("delivering: %v\n%s", err, stderr.String())
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode
	}
	id := webhook.ID("crm", "e-1")
	if code := deliver(id, body, true); code != http.StatusNoContent {
		t.Fatalf("a webhook signed as Interlock signs it: %d, want 204\n%s", code, stderr.String())
	}
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "io.interlock.run.interrupted refund r-42") {
			t.Errorf("the receiver printed %q", line)
		}
	case <-time.After(natstest.Wait):
		t.Fatalf("the receiver printed nothing\n%s", stderr.String())
	}
	if code := deliver(id, body, true); code != http.StatusNoContent {
		t.Errorf("the same webhook again: %d, want 204", code)
	}
	tampered := bytes.Replace(body, []byte("r-42"), []byte("r-43"), 1)
	if code := deliver(webhook.ID("crm", "e-2"), tampered, false); code != http.StatusUnauthorized {
		t.Errorf("an unsigned webhook: %d, want 401", code)
	}
	if code := deliverSignedOther(t, url, key, body, tampered); code != http.StatusUnauthorized {
		t.Errorf("a webhook whose body changed after signing: %d, want 401", code)
	}
	select {
	case line, ok := <-lines:
		if ok {
			t.Errorf("the receiver printed %q for a repeat or a refused webhook", line)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// deliverSignedOther posts sent with the signature of signed.
func deliverSignedOther(t *testing.T, url string, key, signed, sent []byte) int {
	t.Helper()
	id, at := webhook.ID("crm", "e-3"), time.Now()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, bytes.NewReader(sent))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(at.Unix()))
	req.Header.Set("webhook-signature", webhook.Sign(key, id, at, signed))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
