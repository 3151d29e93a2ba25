package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
	"github.com/interlockhq/interlock/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var names = wire.Names{Prefix: wire.DefaultPrefix}

// secret is a Standard Webhooks secret of 32 bytes.
var secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// local is the outbound policy of the tests: their receivers listen on
// 127.0.0.1, which is allowed by name, as for local development.
var local = egress.Policy{Allow: []string{"127.0.0.1"}}

// token is the resume token the test events carry: it must never leave.
const token = "rt_TOPSECRET_resume_token"

// env holds the secrets the test subscriptions name.
func env(name string) (string, bool) {
	if name == "HOOK_SECRET" {
		return secret, true
	}
	return "", false
}

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// deployment starts a server with Interlock's streams and buckets.
func deployment(t *testing.T) (*bus.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return srv, js
}

// publish publishes an outbound event of kind for run of flow refund,
// carrying a resume token and approverRole finance, and returns its id.
func publish(t *testing.T, js jetstream.JetStream, run, kind string) string {
	t.Helper()
	return publishData(t, js, "refund", run, kind, map[string]any{
		"flow": "refund", "run": run, "requestId": "rq-" + run, "resumeToken": token,
		"approverRole": "finance", "kind": "approval", "args": map[string]any{"amount": 4800},
	})
}

func publishData(t *testing.T, js jetstream.JetStream, flow, run, kind string, data any) string {
	t.Helper()
	typ, _ := protocol.OutboundType(kind)
	id := fmt.Sprintf("ev-%s-%s-%s", flow, run, kind)
	ev, err := events.Outbound(id, "interlock/test", typ, flow, run, "", time.Now().UTC(), data)
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(names.Event(flow, run, kind))
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	return id
}

// hit is one request a receiver got.
type hit struct {
	header   http.Header
	body     []byte
	verified error
	payload  webhook.Payload
	// answered is the status the receiver answered.
	answered int
	// at is when the request came.
	at time.Time
}

// receiver is a webhook receiver: it verifies each request with the
// Standard Webhooks library and answers status (200 when 0).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	status atomic.Int32
	// hang, when set, holds every request until the client gives up;
	// slow, when set, answers each after that long.
	hang atomic.Bool
	slow atomic.Int64
	// retryAfter, when set, is sent as Retry-After.
	retryAfter atomic.Value
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The whole body is read first: only then does the server notice
		// the client going away.
		body, _ := io.ReadAll(req.Body)
		if r.hang.Load() {
			<-req.Context().Done()
			return
		}
		h := hit{header: req.Header.Clone(), body: body, verified: wh.Verify(body, req.Header), at: time.Now()}
		_ = json.Unmarshal(body, &h.payload)
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			h.verified = fmt.Errorf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type"))
		}
		h.answered = http.StatusNoContent
		if s := r.status.Load(); s != 0 {
			h.answered = int(s)
		}
		if slow := time.Duration(r.slow.Load()); slow > 0 {
			// A receiver that takes its time, or until the client
			// gives up.
			select {
			case <-time.After(slow):
			case <-req.Context().Done():
			}
		}
		r.mu.Lock()
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		if after, _ := r.retryAfter.Load().(string); after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(h.answered)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// delivered returns the hits answered 2xx.
func (r *receiver) delivered() []hit {
	var out []hit
	for _, h := range r.got() {
		if h.answered/100 == 2 {
			out = append(out, h)
		}
	}
	return out
}

// start starts a webhook service with the subscriptions of yaml on js,
// stopped at cleanup, and returns it with its log.
func start(t *testing.T, js jetstream.JetStream, yaml string, tune ...func(*webhook.Config)) (*webhook.Service, *logBuffer) {
	t.Helper()
	var set *webhook.Set
	if yaml != "" {
		var err error
		if set, err = webhook.Parse([]byte(yaml), "test.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	logs := &logBuffer{}
	log := zerolog.New(logs)
	cfg := webhook.Config{Subscriptions: set, Env: env, FirstRetry: 20 * time.Millisecond, MaxRetry: 100 * time.Millisecond, Egress: local, Logger: &log}
	for _, f := range tune {
		f(&cfg)
	}
	s, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.UseJetStream(js, names)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.WithoutCancel(t.Context())) })
	return s, logs
}

// subscription is the YAML of one subscription to url.
func subscription(name, url string, extra ...string) string {
	return fmt.Sprintf("  - name: %s\n    url: %s\n    secretEnv: HOOK_SECRET\n    events: [interrupted, resumed, completed]\n%s", name, url, indent(extra))
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func subscriptions(subs ...string) string { return "subscriptions:\n" + strings.Join(subs, "") }

// deliveries lists the delivery records.
func deliveries(t *testing.T, js jetstream.JetStream, q webhook.Query) []webhook.Delivery {
	t.Helper()
	list, _, err := webhook.Deliveries(t.Context(), js, names, q)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }
