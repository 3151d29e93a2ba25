// Package webpush is Interlock's Web Push channel: the approvals that wait
// on a person arrive on the devices they subscribed (a phone, a desktop
// browser) as notifications with the title, the key args and the
// deadline, and Approve and Reject actions. Approve decides through the
// person's own single-use decision link, as the link of a mail does;
// Reject, which may need a reason, opens the link's page.
//
// Notices are encrypted to each device (RFC 8291) and signed with the
// deployment's VAPID key (RFC 8292), which is made at first start and
// kept, with the devices, in the configuration bucket, where no client
// reads it. The channel stands on the [notify.Dispatcher] seam, which
// follows the events, finds who an approval reaches, and retries.
package webpush

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	wp "github.com/SherClockHolmes/webpush-go"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Name is the channel's name: its consumer is <prefix>-webpush.
const Name = "webpush"

// Port is what the channel needs of a running Interlock: the dispatcher's
// port and the deployment's outbound policy. *interlock.Service is one.
type Port interface {
	notify.Port
	Egress() egress.Policy
}

// Defaults of [Config].
const (
	DefaultTimeout = 30 * time.Second
	// DefaultTTL is how long a push service keeps a notice for a device
	// that is off, when the approval has no deadline sooner.
	DefaultTTL = 24 * time.Hour
)

// Config configures the channel.
type Config struct {
	// Directory returns the directory of people in force. Required.
	Directory func() *people.Directory
	// PublicURL is the inbox's address (https://interlock.example.com):
	// notices open and decide through links under it. https, or http to
	// a loopback address to try it out. Required.
	PublicURL string
	// Contact is the VAPID subject push services may reach the operator
	// at: a mailto: or https: URL. Defaults to PublicURL when it is https,
	// else mailto:webpush@localhost.
	Contact string
	// Egress says where notices may be sent (see package egress): push
	// services are public; a subscription whose endpoint resolves to a
	// refused address is dead-lettered at once. The zero Policy takes the
	// port's. Ignored when Transport is set.
	Egress egress.Policy
	// Transport makes the requests to the push services. Defaults to
	// Egress's transport.
	Transport http.RoundTripper
	// Timeout bounds one notice. Defaults to DefaultTimeout.
	Timeout time.Duration
	// FirstRetry, MaxRetry, RetryFor, AckWait: see notify.Dispatch.
	FirstRetry, MaxRetry, RetryFor, AckWait time.Duration
	// Logger for the channel. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// Channel is the Web Push channel. [New] makes it; Start and Stop run it
// (it is an interlock.Background).
type Channel struct {
	port   Port
	cfg    Config
	log    zerolog.Logger
	client *http.Client

	mu      sync.Mutex
	devices *Devices
	d       *notify.Dispatcher
}

// New returns the channel of port's Interlock, or what is wrong with cfg.
func New(port Port, cfg Config) (*Channel, error) {
	if port == nil {
		return nil, errors.New("webpush: New needs a Port, such as the *interlock.Service")
	}
	if cfg.Directory == nil {
		return nil, errors.New("webpush: Config.Directory is nil; give the function that returns the directory of people in force")
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	u, err := url.Parse(cfg.PublicURL)
	switch {
	case cfg.PublicURL == "" || err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("webpush: Config.PublicURL %q is not a base address such as https://interlock.example.com", cfg.PublicURL)
	case u.Scheme == "https":
	case u.Scheme == "http" && netaddr.IsLoopbackHost(u.Hostname()):
	default:
		return nil, fmt.Errorf("webpush: Config.PublicURL %q must be https:// (or http:// to a loopback address, to try it out)", cfg.PublicURL)
	}
	if cfg.Contact == "" {
		cfg.Contact = "mailto:webpush@localhost"
		if u.Scheme == "https" {
			cfg.Contact = cfg.PublicURL
		}
	}
	if !strings.HasPrefix(cfg.Contact, "mailto:") && !strings.HasPrefix(cfg.Contact, "https://") {
		return nil, fmt.Errorf("webpush: Config.Contact %q must be a mailto: or https:// URL", cfg.Contact)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Egress.IsZero() {
		cfg.Egress = port.Egress()
	}
	if cfg.Transport == nil {
		cfg.Transport = cfg.Egress.Transport()
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	return &Channel{port: port, cfg: cfg, log: *cfg.Logger,
		client: &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout,
			// A push service answers; it never sends a notice elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Start binds the devices (making the VAPID keys the first time) and
// follows the events.
func (c *Channel) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d != nil {
		return errors.New("webpush: Start called twice")
	}
	devices, err := OpenDevices(ctx, c.port.JetStream(), c.port.Names())
	if err != nil {
		return err
	}
	c.devices = devices
	d, err := notify.StartDispatch(ctx, c.port, c, notify.Dispatch{
		Directory: c.cfg.Directory, PublicURL: c.cfg.PublicURL,
		Description: "Interlock's Web Push: approvals sent to the devices of the people they reach",
		FirstRetry:  c.cfg.FirstRetry, MaxRetry: c.cfg.MaxRetry, RetryFor: c.cfg.RetryFor,
		AckWait: cmp.Or(c.cfg.AckWait, 2*c.cfg.Timeout+time.Minute), Logger: &c.log,
	})
	if err != nil {
		return fmt.Errorf("webpush: %w", err)
	}
	c.d = d
	return nil
}

// Stop stops following the events.
func (c *Channel) Stop(ctx context.Context) error {
	c.mu.Lock()
	d := c.d
	c.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Stop(ctx)
}

// Devices are the channel's devices, once started: what the inbox
// subscribes people's browsers to.
func (c *Channel) Devices() *Devices {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devices
}

// Name implements [notify.Channel].
func (c *Channel) Name() string { return Name }

// Addresses implements [notify.Addresser]: a person's devices; a role
// has none of its own.
func (c *Channel) Addresses(ctx context.Context, to notify.Recipient, _ protocol.Interrupted) ([]string, error) {
	if to.Person == "" {
		return nil, nil
	}
	return c.Devices().Of(ctx, to.Person)
}

// Payload is what a notice carries to the device, encrypted: what the
// service worker shows, and where its actions go.
type Payload struct {
	// Title and Body are the notification's; Tag replaces an older
	// notice of the same request on the device.
	Title string `json:"title"`
	Body  string `json:"body"`
	Tag   string `json:"tag"`
	// URL is the page a click opens: the person's decision link.
	URL string `json:"url"`
	// Actions are the buttons: approve and reject, for an approval.
	Actions []Action `json:"actions,omitempty"`
	// CSRF is the decision link's form token, which Approve posts with.
	CSRF string `json:"csrf,omitempty"`
	// Settled marks a follow-up: the request was settled, and this notice
	// replaces the one that asked (same tag), without buttons.
	Settled bool `json:"settled,omitempty"`
}

// Action is a button of a notification.
type Action struct {
	Action string `json:"action"`
	Title  string `json:"title"`
}

// Bounds of a notice: a push service takes about 4 KB encrypted.
const (
	maxTitle = 120
	maxBody  = 300
)

// payloadOf is the notice of n.
func payloadOf(n notify.Notice) Payload {
	in := n.Interrupt
	p := Payload{Title: cut(cmp.Or(in.Title, in.Action, in.Question, "Interlock needs you"), maxTitle), URL: n.Link, Tag: digest(in.Flow + "." + in.Run)}
	var lines []string
	switch n.Why {
	case notify.WhyVote:
		lines = append(lines, fmt.Sprintf("%d of %d approvals so far.", len(in.Votes), quorumOf(in)))
	case notify.WhyReminder:
		lines = append(lines, "Reminder: this still waits on you.")
	case notify.WhyDelegated:
		lines = append(lines, cut(cmp.Or(n.By, "Someone"), 60)+" delegated this to you.")
	}
	for _, a := range protocol.KeyArgs(in.Args, in.ArgsSchema) {
		lines = append(lines, cut(a.Title+": "+a.Text, 80))
	}
	if in.ExpiresAt != nil {
		lines = append(lines, "Decide by "+in.ExpiresAt.UTC().Format("Mon 2 Jan 15:04 UTC")+".")
	}
	p.Body = cut(strings.Join(lines, "\n"), maxBody)
	if n.FormToken != "" && in.Action != "" {
		p.Actions = []Action{{Action: "approve", Title: "Approve"}, {Action: "reject", Title: "Reject"}}
		p.CSRF = n.FormToken
	}
	return p
}

// quorumOf is how many approvals in takes.
func quorumOf(in protocol.Interrupted) int {
	if in.Quorum == nil {
		return 1
	}
	return in.Quorum.Total()
}

// cut bounds s to n bytes at a rune boundary, on one line each.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Post implements [notify.Channel]: it sends n to the device of
// n.Address. A device its push service no longer knows (404, 410) is
// forgotten, and the notice counts as delivered to nobody.
func (c *Channel) Post(ctx context.Context, n notify.Notice) (string, error) {
	ttl := DefaultTTL
	if in := n.Interrupt; in.ExpiresAt != nil {
		ttl = min(max(time.Until(*in.ExpiresAt), time.Minute), ttl)
	}
	return c.send(ctx, n.Address, n.Person, payloadOf(n), ttl, topic(n.Interrupt.Flow, n.Interrupt.Run))
}

// Settle implements [notify.Settler]: the notice that asked is replaced
// on the device by one that says how the request was settled, without
// buttons, so that no device offers to decide what was decided.
func (c *Channel) Settle(ctx context.Context, s notify.Settled) (string, error) {
	p := Payload{Title: cut(s.What, maxTitle), Body: "Nothing waits on you here any more.", Tag: digest(s.Flow + "." + s.Run), URL: s.Link, Settled: true}
	return c.send(ctx, s.Address, s.Person, p, DefaultTTL, topic(s.Flow, s.Run))
}

// send encrypts p to the device of address, person's, and sends it to the
// device's push service.
func (c *Channel) send(ctx context.Context, address, person string, p Payload, ttl time.Duration, topic string) (string, error) {
	devices := c.Devices()
	s, ok, err := devices.get(ctx, address)
	if err != nil || !ok {
		return "unsubscribed", err
	}
	if s.Person != person {
		// A device is its subscriber's only.
		return "", notify.Permanent(fmt.Errorf("a device of %s is listed as %s's", s.Person, person))
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", notify.Permanent(err)
	}
	sub := &wp.Subscription{Endpoint: s.Endpoint, Keys: wp.Keys{P256dh: s.Keys.P256dh, Auth: s.Keys.Auth}}
	res, err := wp.SendNotificationWithContext(ctx, body, sub, &wp.Options{
		HTTPClient: c.client, Subscriber: c.cfg.Contact, TTL: int(ttl.Seconds()), Urgency: wp.UrgencyHigh,
		Topic: topic, VAPIDPublicKey: devices.public, VAPIDPrivateKey: devices.private,
	})
	host := hostOf(s.Endpoint)
	if err != nil {
		// The endpoint is a credential: errors name its host only.
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return "", notify.Permanent(fmt.Errorf("the push service %s of a device of %s: %w", host, person, refused))
		}
		return "", fmt.Errorf("the push service %s of a device of %s: %s", host, person, withoutURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	_ = res.Body.Close()
	switch code := res.StatusCode; {
	case code >= 200 && code < 300:
		return fmt.Sprintf("pushed %d", code), nil
	case code == http.StatusNotFound || code == http.StatusGone:
		c.log.Info().Str("person", person).Str("push_service", host).Int("status", code).Msg("webpush: the push service no longer knows a device; it is forgotten")
		return "forgotten", devices.forget(ctx, address)
	case code == http.StatusTooManyRequests || code >= 500:
		err := fmt.Errorf("the push service %s of a device of %s answered %d", host, person, code)
		return "", notify.RetryAfter(err, notify.ParseRetryAfter(res.Header.Get("Retry-After"), time.Now()))
	default:
		return "", notify.Permanent(fmt.Errorf("the push service %s of a device of %s refused the notice: %d", host, person, code))
	}
}

// topic is the Topic of a run's notices at the push service, which
// replaces one of them not yet delivered (a follow-up, the next vote's
// request): 32 base64url characters at most.
func topic(flow, run string) string {
	sum := sha256.Sum256([]byte(flow + "." + run))
	return hex.EncodeToString(sum[:16])
}

// hostOf is the host of an endpoint.
func hostOf(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil {
		return u.Host
	}
	return "?"
}

// withoutURL is err's text without the URL of a request that failed.
func withoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
