package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReceiptVerifyChecksADecisionWithThePublicKeyAlone: a gated call's
// decided event, saved to a file, verifies with the audit public key
// alone (no connection: the URL points nowhere); a receipt tampered with,
// or checked with another key, does not, exit 1.
func TestReceiptVerifyChecksADecisionWithThePublicKeyAlone(t *testing.T) {
	url := serveForTest(t, "--gate-rules", "../../examples/gate/rules.yaml")
	if _, _, err := run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=4800", "--call", "call-r", "--wait", "1s"); codeOf(err) != exitReasked {
		t.Fatalf("the refund: %v", err)
	}
	if _, _, err := run(t, url, "answer", "gate", "call-r", "--approve", "--reason", "checked"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, url, "gate", "request", "issue_refund", "orderId=o-1", "amount=4800", "--call", "call-r", "--json")
	if err != nil {
		t.Fatalf("the decision: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "decided.json")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	keysOut, _, err := run(t, url, "audit", "key", "--json")
	var keys []struct {
		PublicKey string `json:"publicKey"`
	}
	if err != nil || json.Unmarshal([]byte(keysOut), &keys) != nil || len(keys) == 0 {
		t.Fatalf("audit key: %v\n%s", err, keysOut)
	}
	nowhere := "nats://127.0.0.1:1"
	got, _, err := run(t, nowhere, "receipt", "verify", "--key", keys[0].PublicKey, file)
	if err != nil || !strings.Contains(got, "receipt VALID: approval of issue_refund approved by") || !strings.Contains(got, "rule large-refund") {
		t.Fatalf("receipt verify: %v\n%s", err, got)
	}
	var ans struct {
		Decided struct {
			Receipt string `json:"receipt"`
		}
	}
	_ = json.Unmarshal([]byte(out), &ans)
	jws := ans.Decided.Receipt
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		t.Fatalf("no receipt in %s", out)
	}
	tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA" + "." + parts[2]
	if got, _, err := run(t, nowhere, "receipt", "verify", "--key", keys[0].PublicKey, tampered); codeOf(err) != exitFailed || !strings.Contains(got, "NOT VALID") {
		t.Fatalf("a tampered receipt: exit %d (%v)\n%s", codeOf(err), err, got)
	}
	if got, _, err := run(t, nowhere, "receipt", "verify", "--key", "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", jws, "--json"); codeOf(err) != exitFailed || !strings.Contains(got, `"valid": false`) {
		t.Fatalf("another key: exit %d (%v)\n%s", codeOf(err), err, got)
	}
}
