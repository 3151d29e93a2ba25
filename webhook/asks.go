package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// AskPort is what the asks' callbacks need of a running Interlock: a
// client to read an ask's run, and the JetStream context and names to
// follow the answered events. *interlock.Service is one.
type AskPort interface {
	Client(source string) *client.Client
	JetStream() jetstream.JetStream
	Names() wire.Names
	// Egress is the deployment's outbound policy (interlock.Config.Egress).
	Egress() egress.Policy
}

// AskConfig configures [AskCallbacks].
type AskConfig struct {
	// Timeout bounds one POST. Defaults to DefaultTimeout.
	Timeout time.Duration
	// FirstRetry, MaxRetry and RetryFor say how a POST that fails is
	// tried again (see notify.Config). RetryFor defaults to
	// DefaultRetryFor.
	FirstRetry, MaxRetry, RetryFor time.Duration
	// Egress says where the POSTs may connect (see package egress): a
	// callback URL that resolves to a refused address is dead-lettered at
	// once. The zero Policy takes the port's; that default refuses
	// loopback, private and link-local addresses (and the other internal
	// ones) unless they are allowed. Ignored when Transport is set.
	Egress egress.Policy
	// Transport makes the requests. Defaults to Egress's transport
	// (egress.Policy.Transport).
	Transport http.RoundTripper
	// Logger for the callbacks. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// AskCallbacks POSTs each settled ask's answered data to the ask's
// callbackUrl (PROTOCOL.md §8), with the Standard Webhooks webhook-id and
// webhook-timestamp and, in place of a signature with a secret the
// agents would share, the answer's receipt (protocol.HeaderReceipt, and
// in the body), which the agent verifies with the audit public key:
// durably (a consumer of the events stream), retried with backoff until
// RetryFor, then dead-lettered; once per ask and event.
type AskCallbacks struct {
	port   AskPort
	cfg    AskConfig
	log    zerolog.Logger
	client *http.Client
	sent   *notify.Sent
	f      *notify.Follower
}

// NewAskCallbacks returns the asks' callbacks of port's Interlock.
func NewAskCallbacks(port AskPort, cfg AskConfig) (*AskCallbacks, error) {
	if port == nil {
		return nil, errors.New("webhooks: NewAskCallbacks needs a port, such as the *interlock.Service")
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.RetryFor = cmp.Or(cfg.RetryFor, DefaultRetryFor)
	if cfg.Transport == nil {
		if cfg.Egress.IsZero() {
			cfg.Egress = port.Egress()
		}
		if err := cfg.Egress.Validate(); err != nil {
			return nil, fmt.Errorf("webhooks: AskConfig.Egress: %w", err)
		}
		cfg.Transport = cfg.Egress.Transport()
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	a := &AskCallbacks{port: port, cfg: cfg, log: *cfg.Logger}
	a.client = &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return a, nil
}

// AskConsumerName is the durable consumer the callbacks follow the answered
// events with.
func AskConsumerName(names wire.Names) string { return names.Prefix + "-ask-callbacks" }

// Start binds the consumer and starts following the answered events.
func (a *AskCallbacks) Start(ctx context.Context) error {
	js, names := a.port.JetStream(), a.port.Names()
	var err error
	if a.sent, err = notify.OpenSent(ctx, js, names, 0, 0); err != nil {
		return err
	}
	a.f, err = notify.Follow(ctx, js, names, notify.Config{Name: AskConsumerName(names), Description: "Interlock's POSTs to asks' callback URLs",
		Kinds: []string{protocol.EventAnswered}, Flows: []string{protocol.AskFlow},
		FirstRetry: a.cfg.FirstRetry, MaxRetry: a.cfg.MaxRetry, RetryFor: a.cfg.RetryFor, AckWait: a.cfg.Timeout + 30*time.Second,
		Parallel: 4, Logger: &a.log}, a.deliver)
	return err
}

// Stop stops following.
func (a *AskCallbacks) Stop(ctx context.Context) error {
	if a.f != nil {
		return a.f.Stop(ctx)
	}
	return nil
}

// deliver POSTs one answered event to its ask's callback URL, if it has
// one.
func (a *AskCallbacks) deliver(ctx context.Context, d notify.Delivery) error {
	var ans protocol.Answered
	if err := json.Unmarshal(d.Event.Data(), &ans); err != nil {
		return notify.Permanent(fmt.Errorf("decoding answered: %w", err))
	}
	// From the runs bucket's leader (notify.Run): a replica that fell
	// behind may not have the ask's run yet, and the callback would be
	// taken for one of a run that is gone, and dropped.
	cp, err := notify.Run(ctx, a.port.JetStream(), a.port.Names(), protocol.AskFlow, ans.AskID)
	if errors.Is(err, notify.ErrRunGone) {
		return nil // the run is gone (its retention ran out): nothing to call back
	}
	if err != nil {
		return fmt.Errorf("ask %s: %w", ans.AskID, err)
	}
	var s struct {
		Ask struct {
			CallbackURL string `json:"callbackUrl"`
		} `json:"ask"`
	}
	if json.Unmarshal(cp.State, &s) != nil || s.Ask.CallbackURL == "" {
		return nil
	}
	id := ID("ask", d.Event.ID())
	sentKey := notify.Key("ask-callback", id)
	if done, err := a.sent.Done(ctx, sentKey); err != nil || done {
		return err
	}
	body, err := json.Marshal(ans)
	if err != nil {
		return notify.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Ask.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return notify.Permanent(fmt.Errorf("ask %s: POST %s: %w", ans.AskID, Redact(s.Ask.CallbackURL), unwrapURL(err)))
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	// Who sent it, and that it is about this ask and this answer, the
	// receipt says, signed with the deployment's audit key: no secret
	// the agents share, which any of them could forge another's POST with.
	if ans.Receipt != "" {
		req.Header.Set(protocol.HeaderReceipt, ans.Receipt)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("ask %s: POST %s: %w", ans.AskID, Redact(s.Ask.CallbackURL), unwrapURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return a.sent.Mark(ctx, sentKey, strconv.Itoa(resp.StatusCode))
	case resp.StatusCode == http.StatusGone:
		return notify.Permanent(fmt.Errorf("ask %s: POST %s: HTTP %s: the receiver is gone for good", ans.AskID, Redact(s.Ask.CallbackURL), resp.Status))
	}
	return fmt.Errorf("ask %s: POST %s: HTTP %s", ans.AskID, Redact(s.Ask.CallbackURL), resp.Status)
}
