package docs_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/interlockhq/interlock/webhook"
)

// receiveWebhook is a receiver's handler of Interlock's webhooks
// (docs/channels.md, Verifying in Go): the signature is checked before
// the event is read.
func receiveWebhook(secret string) http.HandlerFunc {
	wh, err := standardwebhooks.NewWebhook(secret) // the subscription's whsec_ secret
	if err != nil {
		panic(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil { // signature, and a 5-minute window
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// ... store the event, keyed by r.Header.Get("webhook-id") ...
		w.WriteHeader(http.StatusNoContent) // any 2xx: delivered
	}
}

func TestTheDocsWebhookReceiverTakesInterlocksSignatureAndNothingElse(t *testing.T) {
	const secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	key, err := webhook.DecodeSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"io.interlock.run.interrupted","data":{}}`
	post := func(b string) int {
		now := time.Now()
		r := httptest.NewRequest(http.MethodPost, "/hooks/interlock", strings.NewReader(b))
		r.Header.Set(webhook.HeaderID, "msg_1")
		r.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		r.Header.Set(webhook.HeaderSignature, webhook.Sign(key, "msg_1", now, []byte(body)))
		w := httptest.NewRecorder()
		receiveWebhook(secret)(w, r)
		return w.Code
	}
	if code := post(body); code != http.StatusNoContent {
		t.Fatalf("a signed event: %d", code)
	}
	if code := post(strings.Replace(body, "interrupted", "completed", 1)); code != http.StatusUnauthorized {
		t.Fatalf("an altered event: %d, want 401", code)
	}
}
