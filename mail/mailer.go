package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/markdown"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Port is what the mailer needs of a running Interlock: a client of the
// wire protocol (to read a run's checkpoint and its pending interrupt),
// the JetStream context and names (for its consumer and the record of
// mails sent), and the signer of decision links. *interlock.Service is
// one.
type Port interface {
	Client(source string) *client.Client
	JetStream() jetstream.JetStream
	Names() wire.Names
	Links() *links.Signer
}

// Kinds are the events the mailer follows: an interrupt (the first ask,
// an escalation, a quorum's request for the next vote), a reminder, and a
// delegation.
var Kinds = notify.DispatchKinds

// channel names the mailer's records in the bucket of deliveries made.
const (
	channel       = "mail"
	threadChannel = "mail-thread"
)

// ConsumerName is the mailer's durable consumer on the events stream.
func ConsumerName(names wire.Names) string { return notify.ConsumerName(names, channel) }

// Mailer mails Interlock's interrupts, reminders and delegations to the
// people they reach. It is a background service of an interlock.Service:
// Start returns once it follows the events; Stop ends it.
type Mailer struct {
	port   Port
	cfg    Config
	log    zerolog.Logger
	smtp   *gomail.Client
	md     *markdown.Renderer
	domain string

	mu         sync.Mutex
	sent       *notify.Sent
	dispatcher *notify.Dispatcher
	cl         *client.Client
	started    bool
	stopped    bool
}

// New returns a mailer of port's Interlock, or what is wrong with cfg.
func New(port Port, cfg Config) (*Mailer, error) {
	if port == nil {
		return nil, errors.New("mail: New needs a Port, such as the *interlock.Service")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	from, _ := netmail.ParseAddress(cfg.From)
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	opts := []gomail.Option{
		gomail.WithTimeout(cfg.Timeout),
		gomail.WithTLSConfig(&tls.Config{ServerName: strings.Trim(cfg.Host, "[]"), RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}),
	}
	switch cfg.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if cfg.Username != "" {
		auth := gomail.SMTPAuthAutoDiscover
		if cfg.TLS == TLSNone {
			auth = gomail.SMTPAuthPlainNoEnc // loopback only (validate)
		}
		opts = append(opts, gomail.WithSMTPAuth(auth), gomail.WithUsername(cfg.Username), gomail.WithPassword(cfg.Password))
	}
	opts = append(opts, gomail.WithPort(cfg.Port))
	c, err := gomail.NewClient(strings.Trim(cfg.Host, "[]"), opts...)
	if err != nil {
		return nil, fmt.Errorf("mail: %w", err)
	}
	return &Mailer{port: port, cfg: cfg, log: *cfg.Logger, smtp: c, md: markdown.NewMail(), domain: domain}, nil
}

// Start binds the bucket of mails sent and the mailer's durable consumer
// (made the first time, it starts at the events published from then on)
// and follows the events. It does not need the SMTP server: mails wait
// for it, retried with backoff.
func (m *Mailer) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return errors.New("mail: Start called twice, or after Stop")
	}
	m.started = true
	js, names := m.port.JetStream(), m.port.Names()
	sent, err := notify.OpenSent(ctx, js, names, 0, 0)
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	m.sent = sent
	m.cl = m.port.Client("/mail")
	d, err := notify.StartDispatch(ctx, m.port, m, notify.Dispatch{
		Directory: m.cfg.Directory, PublicURL: m.cfg.PublicURL, LinkTTL: m.cfg.LinkTTL,
		Description: "Interlock's e-mail: interrupts, reminders and delegations mailed to the people they reach",
		FirstRetry:  m.cfg.FirstRetry, MaxRetry: m.cfg.MaxRetry, RetryFor: m.cfg.RetryFor,
		AckWait: 2*m.cfg.Timeout + time.Minute, Logger: &m.log,
	})
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	m.dispatcher = d
	m.log.Info().Str("smtp", fmt.Sprintf("%s:%d", m.cfg.Host, m.cfg.Port)).Str("smtp_tls", m.cfg.TLS).
		Bool("smtp_auth", m.cfg.Username != "").Str("public_url", m.cfg.PublicURL).Msg("mail: mailing interrupts")
	return nil
}

// Stop stops following the events: the event in hand finishes, or is
// left to be delivered again when ctx ends. Stopping twice is safe.
func (m *Mailer) Stop(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil
	}
	m.stopped = true
	if m.dispatcher != nil {
		return m.dispatcher.Stop(ctx)
	}
	return nil
}

// Name is the mailer's channel name: its records and its consumer
// (ConsumerName) are named for it, and a person's address is their
// directory entry's email (addresses.mail).
func (m *Mailer) Name() string { return channel }

// Post mails one notice, threaded under the first mail of its run to the
// same address, and returns its Message-ID. A recipient the server
// refuses for good is a [notify.Permanent] error.
func (m *Mailer) Post(ctx context.Context, n notify.Notice) (string, error) {
	in := n.Interrupt
	convo, err := m.conversation(ctx, in)
	if err != nil {
		return "", err
	}
	r := recipient{Person: n.Person, Role: n.Role, Address: n.Address}
	threadKey := notify.Key(threadChannel, in.Flow, in.Run, strings.ToLower(n.Address))
	root, _, err := m.sent.Note(ctx, threadKey)
	if err != nil {
		return "", err
	}
	msg, err := m.compose(in, string(n.Why), n.By, r, convo, n.At, m.messageID(n.Key), root, n.Link)
	if err != nil {
		return "", notify.Permanent(err)
	}
	conn, err := m.smtp.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return "", fmt.Errorf("connecting to the SMTP server %s:%d: %w", m.cfg.Host, m.cfg.Port, err)
	}
	defer func() { _ = m.smtp.CloseWithSMTPClient(conn) }()
	err = m.smtp.SendWithSMTPClient(conn, msg)
	switch {
	case err == nil || msg.IsDelivered():
	case refusedForGood(err):
		return "", notify.Permanent(err)
	default:
		return "", fmt.Errorf("mailing %s: %w", n.Address, err)
	}
	if root == "" {
		if err := m.sent.Mark(ctx, threadKey, msg.GetMessageID()); err != nil {
			return "", err
		}
	}
	return "sent " + msg.GetMessageID(), nil
}

// recipient is one address a mail goes to.
type recipient struct {
	// Person is the directory's name of the person, "" for a role's
	// address; Role is the role whose address it is.
	Person, Role string
	Address      string
}

// refusedForGood reports whether the server refused a recipient, or the
// message, with a permanent (5xx) answer, which another attempt will not
// mend. Other errors (a lost connection, a 4xx, a refused sender or
// login, which an operator mends) are tried again.
func refusedForGood(err error) bool {
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return false
	}
	code := se.ErrorCode()
	return code >= 500 && code < 600 && (se.Reason == gomail.ErrSMTPRcptTo || se.Reason == gomail.ErrSMTPDataClose)
}

// messageID is the stable Message-ID of the mail of one event to one
// recipient (the record's key), without its angle brackets.
func (m *Mailer) messageID(key string) string {
	return "interlock." + strings.TrimPrefix(key, channel+".") + "@" + m.domain
}

// conversation reads the conversation behind a gate run's call or an
// ask, or nil for another run.
func (m *Mailer) conversation(ctx context.Context, in protocol.Interrupted) (*conversation, error) {
	if in.Flow != protocol.GateFlow && in.Flow != protocol.AskFlow {
		return nil, nil
	}
	cp, err := m.cl.Checkpoint(ctx, in.Flow, in.Run)
	if errors.Is(err, client.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the conversation of %s %s: %w", in.Flow, in.Run, err)
	}
	c, ok := cp.Conversation()
	if !ok {
		return nil, nil
	}
	return newConversation(c), nil
}
