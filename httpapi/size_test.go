package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestASlowBodyIsCutOffOnEveryPath: a client that sends its headers, then
// trickles the body, holds the connection no longer than the body timeout
// on any path: a route, a route that answers before reading the body (an
// unknown route), and the unauthenticated caller, answered 401 without its
// body being read.
func TestASlowBodyIsCutOffOnEveryPath(t *testing.T) {
	t.Parallel()
	auth, token, _ := writeAuth(t)
	a := startAPIWith(t, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth, BodyTimeout: time.Second})
	for _, tc := range []struct{ name, path, auth string }{
		{"unauthenticated", "/v1/runs/booking", ""},
		{"a start", "/v1/runs/booking", "Authorization: Bearer " + token + "\r\n"},
		{"no route", "/v1/nowhere", "Authorization: Bearer " + token + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", a.server.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const length = 650 // a byte every 100 ms: 65 s
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				tc.path, tc.auth, length); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() {
				defer close(trickled)
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for range length {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			defer func() { close(stop); <-trickled }()
			// Read whatever the server answers until it closes the
			// connection; give up well before the body would be complete.
			if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			res, err := io.ReadAll(bufio.NewReader(conn))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection is still open after 20 s of a slow body (answered so far: %q)", res)
			}
			t.Logf("answered %q", strings.SplitN(string(res), "\r\n", 2)[0])
		})
	}
}
