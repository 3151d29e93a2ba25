package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/webhook"
	"github.com/interlockhq/interlock/wire"
)

// TestWebhooksPassTheEventChannelSuite: webhooks stand on the events half
// of the channel seam (notify.Follow) and pass its suite, against
// receivers that verify every request with the Standard Webhooks library.
func TestWebhooksPassTheEventChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.RunEvents(t, channeltest.EventHarness{
		Name: "webhooks",
		New: func(t *testing.T) channeltest.EventRemote {
			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			r := &hooks{t: t, wh: wh, subs: map[string]string{}}
			r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
			t.Cleanup(r.srv.Close)
			t.Cleanup(r.answers.Release)
			return r
		},
	})
}

// hooks are the suite's receivers: one path per subscription on a server
// on loopback.
type hooks struct {
	t       *testing.T
	wh      *standardwebhooks.Webhook
	srv     *httptest.Server
	answers channeltest.Answers

	mu       sync.Mutex
	subs     map[string]string // address → subscription
	received []channeltest.Delivered
}

func (h *hooks) Receiver(*testing.T) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.subs)
	addr := h.srv.URL + "/hooks/" + strconv.Itoa(n)
	h.subs[addr] = "sub-" + strconv.Itoa(n)
	return addr
}

func (h *hooks) Subscription(addr string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs[addr]
}

func (h *hooks) Consumer(names wire.Names, addr string) string {
	return names.Prefix + "-webhook-" + h.Subscription(addr)
}

func (h *hooks) Start(t *testing.T, svc *interlock.Service, addrs []string, log *zerolog.Logger) func() {
	t.Helper()
	var subs []string
	for _, a := range addrs {
		subs = append(subs, subscription(h.Subscription(a), a))
	}
	set, err := webhook.Parse([]byte(subscriptions(subs...)), "suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := webhook.New(webhook.Config{Subscriptions: set, Env: env, FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, Egress: local, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.UseJetStream(svc.JetStream(), svc.Names())
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func() { _ = s.Stop(context.WithoutCancel(t.Context())) }
}

func (h *hooks) Received() []channeltest.Delivered {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.received)
}

func (h *hooks) Answer(addr string, a channeltest.Answer) { h.answers.Set(addr, a) }

func (h *hooks) Secret() string { return strings.TrimPrefix(secret, "whsec_") }

func (h *hooks) serve(w http.ResponseWriter, req *http.Request) {
	addr := h.srv.URL + req.URL.Path
	body, _ := io.ReadAll(req.Body)
	switch h.answers.Await(req.Context(), addr) {
	case channeltest.Fail:
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case channeltest.Refuse:
		http.Error(w, "this receiver is gone", http.StatusGone)
		return
	case channeltest.Throttle:
		w.Header().Set("Retry-After", fmt.Sprint(int(channeltest.ThrottleFor.Seconds())))
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case channeltest.Hang:
		return
	}
	if err := h.wh.Verify(body, req.Header); err != nil {
		h.t.Errorf("a delivery to %s does not verify: %v", addr, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p webhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		h.t.Errorf("a delivery to %s is not a payload: %v", addr, err)
	}
	h.mu.Lock()
	h.received = append(h.received, channeltest.Delivered{Address: addr, ID: req.Header.Get("webhook-id"), Kind: p.Type[strings.LastIndex(p.Type, ".")+1:], Run: p.Run})
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
