package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/httpapi"
)

// TestACommandTooLargeForOneMessageIsAnswered413: a body the API reads
// whole, but whose command (the body wrapped in a CloudEvent) would not
// fit in one NATS message, is a client error on every POST route: 413
// invalid_payload saying the limit and what to do, never a 5xx.
func TestACommandTooLargeForOneMessageIsAnswered413(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	pad := strings.Repeat("x", httpapi.MaxBody-200)
	over := strings.Repeat("x", httpapi.MaxBody+1)
	for _, tc := range []struct{ name, path, body string }{
		{"start", "/v1/runs/refund", `{"state":{"orderId":"o-1","amount":4800},"origin":{"note":"` + pad + `"}}`},
		{"resume", "/v1/runs/booking/r-big/resume", `{"answers":{"email":"` + pad + `"}}`},
		{"cancel", "/v1/runs/booking/r-big/cancel", `{"reason":"` + pad + `"}`},
		{"tool request", "/v1/gate/requests", `{"callId":"call-big","tool":"issue_refund","args":{"memo":"` + pad + `"}}`},
		{"body over MaxBody", "/v1/runs/refund", over},
	} {
		if len(tc.body) > httpapi.MaxBody && tc.name != "body over MaxBody" {
			t.Fatalf("%s: the body is %d bytes, more than the API reads", tc.name, len(tc.body))
		}
		r := a.do("POST", tc.path, tc.body)
		if r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s; want 413", tc.name, r.status, r.body)
			continue
		}
		p := r.problem(t)
		if p.Code != httpapi.CodeInvalidPayload || !strings.Contains(p.Detail, strconv.Itoa(httpapi.MaxBody)) {
			t.Errorf("%s: problem %+v; want invalid_payload naming the limit (%d bytes)", tc.name, p, httpapi.MaxBody)
		}
	}
}
