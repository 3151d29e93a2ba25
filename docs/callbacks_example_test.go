package docs_test

import (
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// receiveAnswer is an ask's callback receiver, as docs/asks.md shows it:
// it believes a POST only when its receipt verifies with the deployment's
// audit key and states this ask's answer.
func receiveAnswer(keys map[string]ed25519.PublicKey, askID string, act func(protocol.Answered)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var a protocol.Answered
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&a); err != nil {
			http.Error(w, "not an answer", http.StatusBadRequest)
			return
		}
		receipt, err := protocol.VerifyReceipt(keys, r.Header.Get(protocol.HeaderReceipt), time.Now())
		if err == nil {
			err = receipt.CheckAnswered(a)
		}
		if err != nil || a.AskID != askID {
			http.Error(w, "not a receipt of this ask's answer", http.StatusForbidden)
			return
		}
		act(a)
		w.WriteHeader(http.StatusNoContent)
	}
}

// TestTheCallbackReceiverOfTheDocsBelievesOnlyAReceipt runs docs/asks.md's
// receiver: an answer whose receipt states it is acted on; one without, or
// whose receipt states another answer, is refused.
func TestTheCallbackReceiverOfTheDocsBelievesOnlyAReceipt(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(nil)
	kid := protocol.AuditKeyID(pub)
	digest, _ := protocol.AnswerDigest(nil, []string{"a"})
	receipt, err := protocol.SignReceipt(kid, priv, protocol.Receipt{Flow: protocol.AskFlow, Run: "ask-1", Kind: protocol.KindChoice,
		Decision: protocol.ReceiptAnswered, AnswerDigest: digest, At: time.Now(), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var acted []protocol.Answered
	h := receiveAnswer(map[string]ed25519.PublicKey{kid: pub}, "ask-1", func(a protocol.Answered) { acted = append(acted, a) })
	post := func(body, header string) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/interlock", strings.NewReader(body))
		req.Header.Set(protocol.HeaderReceipt, header)
		rec := httptest.NewRecorder()
		h(rec, req)
		return rec.Code
	}
	answer := `{"askId":"ask-1","status":"answered","kind":"choice","selected":["a"],"at":"2026-11-21T10:00:00Z"}`
	if code := post(answer, receipt); code != http.StatusNoContent || len(acted) != 1 {
		t.Fatalf("the real answer: %d, %d acted on", code, len(acted))
	}
	if code := post(strings.Replace(answer, `["a"]`, `["b"]`, 1), receipt); code != http.StatusForbidden {
		t.Errorf("another answer with the receipt: %d, want 403", code)
	}
	if code := post(answer, ""); code != http.StatusForbidden {
		t.Errorf("an answer without a receipt: %d, want 403", code)
	}
	if len(acted) != 1 {
		t.Errorf("%d answers acted on, want 1", len(acted))
	}
}
