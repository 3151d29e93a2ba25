package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
)

func TestDeliveriesVerifyWithTheStandardWebhooksLibraryAndHoldNoResumeToken(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	var attempts []webhook.Attempt
	done := make(chan struct{})
	_, logs := start(t, js, subscriptions(subscription("crm", rcv.URL+"/hooks?key=QUERYSECRET")), func(c *webhook.Config) {
		c.Observe = func(a webhook.Attempt) { attempts = append(attempts, a); close(done) }
	})
	id := publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.Eventually(t, "the receiver got the event", func() bool { return len(rcv.delivered()) == 1 })
	h := rcv.got()[0]
	if h.verified != nil {
		t.Fatalf("the Standard Webhooks library does not verify the delivery: %v", h.verified)
	}
	if got, want := h.header.Get("webhook-id"), webhook.ID("crm", id); got != want || !strings.HasPrefix(got, "msg_") {
		t.Fatalf("webhook-id %q, want %q", got, want)
	}
	p := h.payload
	if p.Type != protocol.TypeInterrupted || p.EventID != id || p.Flow != "refund" || p.Run != "r-1" || p.Timestamp.IsZero() {
		t.Fatalf("payload %+v: want the event's type, id, flow, run and time", p)
	}
	var data map[string]any
	if err := json.Unmarshal(p.Data, &data); err != nil || data["requestId"] != "rq-r-1" || data["approverRole"] != "finance" {
		t.Fatalf("payload data %s (%v): want the event's data", p.Data, err)
	}
	if strings.Contains(string(h.body), token) || strings.Contains(strings.ToLower(string(h.body)), "resumetoken") {
		t.Fatalf("the payload carries the resume token: %s", h.body)
	}
	<-done
	if len(attempts) != 1 || attempts[0].Status != webhook.StatusDelivered || attempts[0].HTTPStatus != http.StatusNoContent || attempts[0].Subscription != "crm" {
		t.Fatalf("observed %+v; want one delivered attempt answered 204", attempts)
	}
	natstest.Eventually(t, "the delivery recorded", func() bool {
		d := deliveries(t, js, webhook.Query{Subscription: "crm"})
		return len(d) == 1 && d[0].Status == webhook.StatusDelivered && d[0].HTTPStatus == 204 && d[0].Attempts == 1 && d[0].EventID == id
	})
	rec := deliveries(t, js, webhook.Query{})[0]
	if strings.Contains(rec.URL, "QUERYSECRET") || strings.Contains(logs.String(), "QUERYSECRET") || strings.Contains(logs.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("a credential of the URL or the secret is in the record %+v or the log", rec)
	}
}

// A receiver that is down has every event tried, each on its own
// backoff (none waits for another), and gets each once when it is back,
// with the webhook-id of its first attempt.
func TestAReceiverDownForAWhileGetsEveryEventOnceWhenItIsBack(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusServiceUnavailable)
	start(t, js, subscriptions(subscription("crm", rcv.URL)))
	var ids []string
	for _, run := range []string{"r-1", "r-2", "r-3", "r-4"} {
		ids = append(ids, publish(t, js, run, protocol.EventInterrupted))
	}
	tried := func() map[string]int {
		n := map[string]int{}
		for _, h := range rcv.got() {
			n[h.header.Get("webhook-id")]++
		}
		return n
	}
	natstest.Eventually(t, "every event refused twice", func() bool {
		n := tried()
		for _, id := range ids {
			if n[webhook.ID("crm", id)] < 2 {
				return false
			}
		}
		return true
	})
	natstest.Eventually(t, "the deliveries recorded as retrying with their status", func() bool {
		d := deliveries(t, js, webhook.Query{Status: webhook.StatusRetrying})
		return len(d) == len(ids) && d[0].HTTPStatus == http.StatusServiceUnavailable && strings.Contains(d[0].Error, "503")
	})
	rcv.status.Store(0)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range rcv.got() {
				t.Logf("hit %s %s %d", h.header.Get("webhook-id"), h.payload.EventID, h.answered)
			}
			for _, d := range deliveries(t, js, webhook.Query{}) {
				t.Logf("record %+v", d)
			}
		}
	})
	natstest.Eventually(t, "every event delivered", func() bool { return len(rcv.delivered()) >= len(ids) })
	seen := map[string]bool{}
	for _, h := range rcv.delivered() {
		id := h.header.Get("webhook-id")
		if seen[id] {
			t.Fatalf("webhook-id %s delivered twice", id)
		}
		seen[id] = true
		if id != webhook.ID("crm", h.payload.EventID) {
			t.Fatalf("event %s delivered with webhook-id %s; every attempt of one event carries its id", h.payload.EventID, id)
		}
	}
	for _, id := range ids {
		if !seen[webhook.ID("crm", id)] {
			t.Fatalf("event %s was not delivered", id)
		}
	}
	natstest.Eventually(t, "every delivery recorded delivered", func() bool {
		return len(deliveries(t, js, webhook.Query{Status: webhook.StatusDelivered})) == len(ids)
	})
}

func TestAReceiverThatAlwaysFailsIsDeadLetteredWithItsStatus(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusInternalServerError)
	_, logs := start(t, js, subscriptions(subscription("crm", rcv.URL, "retryFor: 1s")))
	publish(t, js, "r-1", protocol.EventInterrupted)
	dls := natstest.WaitFor(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	dl := dls[0]
	if c := dl.Header.Get(bus.HeaderConsumer); c != "interlock-webhook-crm" {
		t.Fatalf("dead letter names consumer %q", c)
	}
	if e := dl.Header.Get(bus.HeaderError); !strings.Contains(e, "HTTP 500") {
		t.Fatalf("dead letter's error %q does not give the last status", e)
	}
	if len(rcv.got()) < 3 {
		t.Fatalf("dead-lettered after %d attempts; it should be tried until retryFor", len(rcv.got()))
	}
	natstest.Eventually(t, "the delivery recorded as dead", func() bool {
		d := deliveries(t, js, webhook.Query{Status: webhook.StatusDead})
		return len(d) == 1 && d[0].HTTPStatus == 500 && d[0].Attempts == len(rcv.got())
	})
	for what, text := range map[string]string{"dead letter": string(dl.Data) + strings.Join(flatten(dl.Header), " "), "log": logs.String()} {
		if strings.Contains(text, token) {
			t.Fatalf("the resume token is in the %s", what)
		}
	}
}

func flatten(h map[string][]string) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k+": "+strings.Join(vs, ","))
	}
	return out
}

func TestGoneDeadLettersAtOnce(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusGone)
	start(t, js, subscriptions(subscription("crm", rcv.URL)))
	publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.WaitFor(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	if n := len(rcv.got()); n != 1 {
		t.Fatalf("%d attempts; 410 Gone is final", n)
	}
	natstest.Eventually(t, "the delivery recorded as dead", func() bool {
		d := deliveries(t, js, webhook.Query{})
		return len(d) == 1 && d[0].Status == webhook.StatusDead && d[0].HTTPStatus == http.StatusGone
	})
}

func TestAHangingReceiverHoldsBackNoOtherSubscription(t *testing.T) {
	_, js := deployment(t)
	slow, fast := newReceiver(t), newReceiver(t)
	slow.hang.Store(true)
	s, _ := start(t, js, subscriptions(subscription("slow", slow.URL, "timeout: 1m"), subscription("fast", fast.URL)))
	for _, run := range []string{"r-1", "r-2", "r-3"} {
		publish(t, js, run, protocol.EventInterrupted)
	}
	natstest.Eventually(t, "the fast receiver got every event", func() bool { return len(fast.delivered()) == 3 })
	if n := len(slow.got()); n != 0 {
		t.Fatalf("the hanging receiver answered %d requests", n)
	}
	stop, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_ = s.Stop(stop)
}

func TestARestartMidRetryLosesNothing(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusBadGateway)
	yaml := subscriptions(subscription("crm", rcv.URL))
	first, _ := start(t, js, yaml)
	id := publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.Eventually(t, "two refused attempts", func() bool { return len(rcv.got()) >= 2 })
	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish(t, js, "r-2", protocol.EventInterrupted) // while no process delivers
	rcv.status.Store(0)
	start(t, js, yaml)
	natstest.Eventually(t, "both events delivered after the restart", func() bool { return len(rcv.delivered()) >= 2 })
	d := rcv.delivered()
	if len(d) != 2 || d[0].payload.EventID == d[1].payload.EventID || d[0].payload.EventID != id && d[1].payload.EventID != id {
		t.Fatalf("delivered %d events (%s first); want the retried one and the one published while stopped, once each", len(d), d[0].payload.EventID)
	}
}

func TestRolesLimitTheEventsToTheirApprovers(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	start(t, js, subscriptions(subscription("legal", rcv.URL, "roles: [legal]")))
	publish(t, js, "r-finance", protocol.EventInterrupted)
	id := publishData(t, js, "refund", "r-legal", protocol.EventInterrupted, map[string]any{"approverRole": "legal", "requestId": "rq"})
	natstest.Eventually(t, "the legal interrupt delivered", func() bool { return len(rcv.delivered()) == 1 })
	if got := rcv.delivered()[0].payload.EventID; got != id {
		t.Fatalf("delivered %s; only the interrupt for legal should be", got)
	}
}

func TestCallbackURLIsAddedToInterruptedPayloadsOfSubscriptionsThatAsk(t *testing.T) {
	_, js := deployment(t)
	with, without := newReceiver(t), newReceiver(t)
	start(t, js, subscriptions(subscription("with", with.URL, "callbacks: true", "callbacksAs: pagerduty"), subscription("without", without.URL)), func(c *webhook.Config) {
		c.CallbackURL = func(_ context.Context, sub, person, flow, run, requestID string, _ time.Time) (string, error) {
			return "https://interlock.example/v1/callbacks/" + sub + "-" + person + "-" + flow + "-" + run + "-" + requestID, nil
		}
	})
	publish(t, js, "r-1", protocol.EventInterrupted)
	publish(t, js, "r-1", protocol.EventResumed)
	natstest.Eventually(t, "both events at both receivers", func() bool { return len(with.delivered()) == 2 && len(without.delivered()) == 2 })
	if got := with.delivered()[0].payload.CallbackURL; got != "https://interlock.example/v1/callbacks/with-pagerduty-refund-r-1-rq-r-1" {
		t.Fatalf("callbackUrl %q", got)
	}
	if got := with.delivered()[1].payload.CallbackURL; got != "" {
		t.Fatalf("a resumed event got callbackUrl %q", got)
	}
	if got := without.delivered()[0].payload.CallbackURL; got != "" {
		t.Fatalf("a subscription without callbacks got callbackUrl %q", got)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	_, js := deployment(t)
	target := newReceiver(t)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	start(t, js, subscriptions(subscription("crm", redirect.URL)))
	publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.Eventually(t, "the redirect recorded as a failed attempt", func() bool {
		d := deliveries(t, js, webhook.Query{})
		return len(d) == 1 && d[0].Status == webhook.StatusRetrying && d[0].HTTPStatus == http.StatusTemporaryRedirect && strings.Contains(d[0].Error, "not followed")
	})
	if n := len(target.got()); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

func TestSubscriptionsAreAddedChangedAndRemovedThroughTheKey(t *testing.T) {
	_, js := deployment(t)
	a, b := newReceiver(t), newReceiver(t)
	s, logs := start(t, js, "")
	config, err := js.KeyValue(t.Context(), names.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	put := func(yaml string) uint64 {
		rev, err := config.Put(t.Context(), webhook.Key, []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, "the value applied", func() bool { return s.Revision() == rev })
		return rev
	}
	// Added.
	put(subscriptions(subscription("crm", a.URL)))
	if got := s.Running(); len(got) != 1 || got[0] != "crm" {
		t.Fatalf("running %v after adding crm", got)
	}
	publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.Eventually(t, "receiver a got the event", func() bool { return len(a.delivered()) == 1 })
	// Changed: now to b, and only for flow refund (the consumer's filter
	// changes too).
	put(subscriptions(subscription("crm", b.URL, "flows: [refund]")))
	publishData(t, js, "booking", "r-other", protocol.EventInterrupted, map[string]any{"requestId": "rq"})
	publish(t, js, "r-2", protocol.EventInterrupted)
	natstest.Eventually(t, "receiver b got the next event", func() bool { return len(b.delivered()) == 1 })
	if len(a.got()) != 1 {
		t.Fatalf("receiver a got %d events after the change", len(a.got()))
	}
	// A value that does not parse is refused; crm stays.
	rev := s.Revision()
	if _, err := config.Put(t.Context(), webhook.Key, []byte("subscriptions:\n  - name: crm\n    url: ftp://x\n")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the bad value refused", func() bool { return s.Refused() != nil })
	if s.Revision() != rev || len(s.Running()) != 1 || !strings.Contains(logs.String(), "refused") {
		t.Fatalf("after a bad value: revision %d (was %d), running %v", s.Revision(), rev, s.Running())
	}
	// Removed: the consumer goes too.
	put("subscriptions: []\n")
	if got := s.Running(); len(got) != 0 {
		t.Fatalf("running %v after removing every subscription", got)
	}
	for _, stream := range []string{names.EventStream(), names.RetryStream()} {
		if _, err := js.Consumer(t.Context(), stream, "interlock-webhook-crm"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("the removed subscription's consumer of %s: %v", stream, err)
		}
	}
}

func TestTheFileIsWrittenToTheKeyWhenItChanges(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	file := t.TempDir() + "/webhooks.yaml"
	write := func(yaml string) {
		if err := writeFile(file, yaml); err != nil {
			t.Fatal(err)
		}
	}
	first := subscriptions(subscription("one", rcv.URL))
	write(first)
	s, _ := start(t, js, first, func(c *webhook.Config) { c.File = file; c.PollFile = 10 * time.Millisecond })
	if got := s.Running(); len(got) != 1 || got[0] != "one" {
		t.Fatalf("running %v", got)
	}
	write("subscriptions:\n  - name: [broken\n")
	write(subscriptions(subscription("two", rcv.URL)))
	natstest.Eventually(t, "the changed file applied", func() bool { r := s.Running(); return len(r) == 1 && r[0] == "two" })
}

func TestAnUnreadableSecretKeepsThisProcessFromDeliveringIt(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	s, _ := start(t, js, "subscriptions:\n  - name: crm\n    url: "+rcv.URL+"\n    secretEnv: NOT_SET_HERE\n    events: [interrupted]\n"+subscription("other", rcv.URL))
	if got := s.Running(); len(got) != 1 || got[0] != "other" {
		t.Fatalf("running %v; want only the subscription whose secret this process has", got)
	}
	if err := s.Refused(); err == nil || !strings.Contains(err.Error(), "NOT_SET_HERE is not set") {
		t.Fatalf("Refused() = %v; want the variable that is not set", err)
	}
}

func TestDeliveriesAreListedNewestFirstAPageAtATime(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	start(t, js, subscriptions(subscription("crm", rcv.URL)))
	var ids []string
	for _, run := range []string{"r-1", "r-2", "r-3"} {
		ids = append(ids, publish(t, js, run, protocol.EventInterrupted))
	}
	natstest.Eventually(t, "three deliveries recorded", func() bool { return len(deliveries(t, js, webhook.Query{})) == 3 })
	list, more, err := webhook.Deliveries(t.Context(), js, names, webhook.Query{Limit: 2})
	if err != nil || !more || len(list) != 2 || list[0].EventID != ids[2] || list[1].EventID != ids[1] {
		t.Fatalf("Deliveries(limit 2) = %d records (more %v, %v); want r-3 then r-2, and more", len(list), more, err)
	}
	if list, _, _ := webhook.Deliveries(t.Context(), js, names, webhook.Query{Subscription: "other"}); len(list) != 0 {
		t.Fatalf("another subscription's deliveries: %+v", list)
	}
	if _, _, err := webhook.Deliveries(t.Context(), js, names, webhook.Query{Status: "lost"}); err == nil || !strings.Contains(err.Error(), "use delivered, retrying, dead") {
		t.Fatalf("Deliveries(status lost) = %v", err)
	}
}

// An attempt that was not the last when it began, but after which
// retryFor has passed (the receiver took its time), ends the delivery:
// its record says dead, as the dead letter does, not failed.
func TestASlowFailureThatUsesUpRetryForIsRecordedDead(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusServiceUnavailable)
	rcv.slow.Store(int64(600 * time.Millisecond))
	start(t, js, subscriptions(subscription("crm", rcv.URL, "retryFor: 1s")))
	publish(t, js, "r-slow", protocol.EventInterrupted)
	natstest.WaitFor(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	natstest.Eventually(t, "the delivery recorded as dead", func() bool {
		d := deliveries(t, js, webhook.Query{Status: webhook.StatusDead})
		return len(d) == 1 && d[0].HTTPStatus == http.StatusServiceUnavailable && d[0].Attempts == len(rcv.got())
	})
}

// TestARetryAfterIsHonoured: a receiver that answers 429 with
// Retry-After gets the next attempt no sooner than it asked, not at the
// back-off's pace (tens of milliseconds here).
func TestARetryAfterIsHonoured(t *testing.T) {
	_, js := deployment(t)
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusTooManyRequests)
	rcv.retryAfter.Store("1")
	start(t, js, subscriptions(subscription("crm", rcv.URL)))
	publish(t, js, "r-1", protocol.EventInterrupted)
	natstest.Eventually(t, "the first attempt", func() bool { return len(rcv.got()) > 0 })
	rcv.status.Store(0)
	rcv.retryAfter.Store("")
	natstest.Eventually(t, "the delivery", func() bool { return len(rcv.delivered()) == 1 })
	hits := rcv.got()
	if len(hits) != 2 {
		t.Fatalf("%d attempts, want 2: the throttled one and the one it asked to wait for", len(hits))
	}
	if gap := hits[1].at.Sub(hits[0].at); gap < time.Second {
		t.Fatalf("the second attempt came %s after the first, which asked for Retry-After: 1", gap)
	}
}
