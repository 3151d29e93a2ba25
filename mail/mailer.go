package mail

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	netmail "net/mail"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/markdown"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
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
var Kinds = []string{protocol.EventInterrupted, protocol.EventReminded, protocol.EventAssigned}

// channel names the mailer's records in the bucket of deliveries made.
const (
	channel       = "mail"
	threadChannel = "mail-thread"
	// refusedNote starts the record of a recipient the server refused
	// for good, followed by the server's answer.
	refusedNote = "refused: "
)

// ConsumerName is the mailer's durable consumer on the events stream.
func ConsumerName(names wire.Names) string { return names.Prefix + "-mail" }

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

	mu       sync.Mutex
	sent     *notify.Sent
	follower *notify.Follower
	cl       *client.Client
	started  bool
	stopped  bool
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
	f, err := notify.Follow(ctx, js, names, notify.Config{
		Name: ConsumerName(names), Description: "Interlock's e-mail: interrupts, reminders and delegations mailed to the people they reach",
		Kinds: Kinds, FirstRetry: m.cfg.FirstRetry, MaxRetry: m.cfg.MaxRetry, RetryFor: m.cfg.RetryFor,
		AckWait: 2*m.cfg.Timeout + time.Minute, Logger: &m.log,
	}, m.handle)
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	m.follower = f
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
	if m.follower != nil {
		return m.follower.Stop(ctx)
	}
	return nil
}

// handle mails one event to the people it reaches.
func (m *Mailer) handle(ctx context.Context, d notify.Delivery) error {
	var (
		in   protocol.Interrupted
		why  = whyAsked
		by   string
		data = d.Event.Data()
	)
	switch d.Kind {
	case protocol.EventInterrupted:
		if err := json.Unmarshal(data, &in); err != nil {
			return notify.Permanent(fmt.Errorf("decoding %s: %w", d.Kind, err))
		}
		in.ResumeToken = ""
		if len(in.Votes) > 0 {
			why = whyVote
		}
		// An interrupt settled since (a backlog after a pause, an SMTP
		// outage) is mailed to nobody: the mail would say it waits.
		if ok, err := notify.StillWaits(ctx, m.port.JetStream(), m.port.Names(), in.Flow, in.Run, in.RequestID); err != nil || !ok {
			return err
		}
	case protocol.EventReminded:
		var r protocol.Reminded
		if err := json.Unmarshal(data, &r); err != nil {
			return notify.Permanent(fmt.Errorf("decoding %s: %w", d.Kind, err))
		}
		p, ok, err := m.pending(ctx, r.Flow, r.Run, r.RequestID)
		if err != nil || !ok {
			return err
		}
		in, why = p, whyReminder
		in.ApproverRole, in.Assignees, in.ClaimedBy = r.ApproverRole, r.Assignees, r.ClaimedBy
		if r.ExpiresAt != nil {
			in.ExpiresAt = r.ExpiresAt
		}
	case protocol.EventAssigned:
		var a protocol.Assigned
		if err := json.Unmarshal(data, &a); err != nil {
			return notify.Permanent(fmt.Errorf("decoding %s: %w", d.Kind, err))
		}
		if a.Op != "delegate" {
			return nil
		}
		p, ok, err := m.pending(ctx, a.Flow, a.Run, a.RequestID)
		if err != nil || !ok {
			return err
		}
		in, why, by = p, whyDelegated, a.By
		in.Assignees, in.ClaimedBy, in.ApproverRole = a.Assignees, a.ClaimedBy, a.ApproverRole
	default:
		return nil
	}
	return m.mail(ctx, d, in, why, by)
}

// pending returns the interrupt a run waits on, if it is still request
// requestID: a reminder or a delegation of a request since settled mails
// nobody.
func (m *Mailer) pending(ctx context.Context, flow, run, requestID string) (protocol.Interrupted, bool, error) {
	in, err := m.cl.LastInterrupt(ctx, flow, run)
	switch {
	case errors.Is(err, client.ErrNotWaiting), errors.Is(err, client.ErrNotFound):
		return in, false, nil
	case err != nil:
		return in, false, fmt.Errorf("reading the interrupt of %s %s: %w", flow, run, err)
	}
	in.ResumeToken = ""
	return in, in.RequestID == requestID, nil
}

// recipient is one address a mail goes to.
type recipient struct {
	// Person is the directory's name of the person, "" for a role's
	// address; Role is the role whose address it is.
	Person, Role string
	Address      string
}

// recipients are who an interrupt reaches by mail: its claimant, else its
// assignees, else the holders of its approver role and of its quorum's
// roles, and those roles' own addresses; never a person without an
// address, a person who already voted on it, or (with separation of
// duties) its requester or whoever started the run (startedBy). Each
// address once.
func (m *Mailer) recipients(in protocol.Interrupted, startedBy string) []recipient {
	dir := m.cfg.Directory()
	roles := protocol.DeciderRoles(in.ApproverRole, in.Quorum)
	assignees := in.Assignees
	if in.ClaimedBy != "" {
		assignees = []string{in.ClaimedBy}
	}
	ps, rs := dir.Reach(roles, assignees)
	var out []recipient
	seen := map[string]bool{}
	add := func(r recipient) {
		k := strings.ToLower(r.Address)
		if r.Address != "" && !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	for _, p := range ps {
		if voted(in.Votes, p) || in.SeparationOfDuties && p.Name != "" && (p.Name == in.Requester || p.Name == startedBy) {
			continue
		}
		add(recipient{Person: p.Name, Address: p.Email})
	}
	for _, r := range rs {
		add(recipient{Role: r.Name, Address: r.Email})
	}
	return out
}

// startedBy is who started the run of a quorum's approval with
// separation of duties, from its checkpoint, who may not vote on it; ""
// for another interrupt, or a run no longer stored.
func (m *Mailer) startedBy(ctx context.Context, in protocol.Interrupted) (string, error) {
	if in.Quorum == nil || !in.SeparationOfDuties {
		return "", nil
	}
	cp, err := m.cl.Checkpoint(ctx, in.Flow, in.Run)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading who started %s %s: %w", in.Flow, in.Run, err)
	}
	return cp.StartedBy, nil
}

// voted reports whether p cast one of votes.
func voted(votes []protocol.Vote, p people.Person) bool {
	return slices.ContainsFunc(votes, func(v protocol.Vote) bool { return v.Approver == p.Name })
}

// mail mails in to everyone it reaches who has not had this event's mail.
// A recipient the server refuses for good is recorded so that the event,
// delivered again, skips them, and the event is dead-lettered naming them
// once the others have theirs.
func (m *Mailer) mail(ctx context.Context, d notify.Delivery, in protocol.Interrupted, why, by string) error {
	startedBy, err := m.startedBy(ctx, in)
	if err != nil {
		return err
	}
	rs := m.recipients(in, startedBy)
	if len(rs) == 0 {
		m.log.Debug().Str("flow", in.Flow).Str("run", in.Run).Str("request_id", in.RequestID).Str("kind", d.Kind).
			Msg("mail: nobody with an address is reached by this event")
		return nil
	}
	var (
		conn    *smtp.Client
		refused []string
		convo   *conversation
		convoOK bool
	)
	defer func() {
		if conn != nil {
			_ = m.smtp.CloseWithSMTPClient(conn)
		}
	}()
	for _, r := range rs {
		key := notify.Key(channel, d.Event.ID(), strings.ToLower(r.Address))
		note, done, err := m.sent.Note(ctx, key)
		if err != nil {
			return err
		}
		if done {
			if strings.HasPrefix(note, refusedNote) {
				refused = append(refused, r.Address+": "+strings.TrimPrefix(note, refusedNote))
			}
			continue
		}
		if !convoOK {
			if convo, err = m.conversation(ctx, in); err != nil {
				return err
			}
			convoOK = true
		}
		threadKey := notify.Key(threadChannel, in.Flow, in.Run, strings.ToLower(r.Address))
		root, _, err := m.sent.Note(ctx, threadKey)
		if err != nil {
			return err
		}
		msg, err := m.compose(in, why, by, r, convo, d.Event.Time(), m.messageID(key), root)
		if err != nil {
			return notify.Permanent(err)
		}
		if conn == nil {
			if conn, err = m.smtp.DialToSMTPClientWithContext(ctx); err != nil {
				conn = nil
				return fmt.Errorf("connecting to the SMTP server %s:%d: %w", m.cfg.Host, m.cfg.Port, err)
			}
		}
		err = m.smtp.SendWithSMTPClient(conn, msg)
		switch {
		case err == nil || msg.IsDelivered():
			if err := m.sent.Mark(ctx, key, "sent "+msg.GetMessageID()); err != nil {
				return err
			}
			if root == "" {
				if err := m.sent.Mark(ctx, threadKey, msg.GetMessageID()); err != nil {
					return err
				}
			}
			m.log.Debug().Str("flow", in.Flow).Str("run", in.Run).Str("request_id", in.RequestID).Str("person", r.Person).
				Str("role", r.Role).Str("message_id", msg.GetMessageID()).Msg("mail: sent")
		case refusedForGood(err):
			if err := m.sent.Mark(ctx, key, refusedNote+err.Error()); err != nil {
				return err
			}
			refused = append(refused, r.Address+": "+err.Error())
		default:
			return fmt.Errorf("mailing %s: %w", r.Address, err)
		}
	}
	if len(refused) > 0 {
		return notify.Permanent(fmt.Errorf("the SMTP server refused for good the mail to %s", strings.Join(refused, "; ")))
	}
	return nil
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

// link is where a recipient goes from the mail: a person's own signed
// decision link, or for a role's address the run's page in the inbox.
func (m *Mailer) link(in protocol.Interrupted, r recipient, now time.Time) (string, error) {
	base := strings.TrimRight(m.cfg.PublicURL, "/")
	if r.Person == "" {
		return base + "/runs/" + url.PathEscape(in.Flow) + "/" + url.PathEscape(in.Run), nil
	}
	expires := now.Add(m.cfg.LinkTTL)
	if in.ExpiresAt != nil {
		expires = *in.ExpiresAt
	}
	text, err := m.port.Links().Sign(links.Claims{Kind: links.KindDecide, Flow: in.Flow, Run: in.Run,
		RequestID: in.RequestID, Person: r.Person, Expires: expires.Unix()})
	if err != nil {
		return "", fmt.Errorf("signing the decision link of %s: %w", r.Person, err)
	}
	return base + links.DecidePath + text, nil
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
