package mail_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/mail"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
)

// TestMailPassesTheChannelSuite: mail is a channel of the seam, against a
// real SMTP server on loopback.
func TestMailPassesTheChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{
		Name:     "mail",
		Features: channeltest.Features{Roles: true},
		New:      func(t *testing.T) channeltest.Remote { return &mailRemote{t: t, d: startSMTPD(t, false)} },
	})
}

// mailRemote is the suite's SMTP server.
type mailRemote struct {
	t *testing.T
	d *smtpd
}

func (m *mailRemote) Reach(_ *testing.T, _ *interlock.Service, person string) (string, string) {
	return person + "@example.com", person + "@example.com"
}

func (m *mailRemote) RoleAddress(role string) string { return role + "@example.com" }

func (m *mailRemote) Start(t *testing.T, svc *interlock.Service, d notify.Dispatch) func() {
	t.Helper()
	cfg, err := mail.LoadConfig("", func(k string) string {
		return map[string]string{
			mail.EnvHost: "127.0.0.1", mail.EnvPort: fmt.Sprint(m.d.port()), mail.EnvTLS: mail.TLSStartTLS,
			mail.EnvUsername: m.d.user, mail.EnvPassword: m.d.pass, mail.EnvCAFile: m.d.ca,
			mail.EnvFrom: "Interlock <interlock@example.com>", mail.EnvPublicURL: d.PublicURL,
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Directory, cfg.Logger = d.Directory, d.Logger
	cfg.FirstRetry, cfg.MaxRetry = d.FirstRetry, d.MaxRetry
	mailer, err := mail.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mailer.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func() { _ = mailer.Stop(context.WithoutCancel(t.Context())) }
}

func (m *mailRemote) Received() []channeltest.Received {
	var out []channeltest.Received
	for _, r := range m.d.received() {
		p := parseMail(m.t, r.Raw)
		for _, to := range r.To {
			out = append(out, channeltest.Received{Address: strings.ToLower(to), Link: linkRe.FindString(p.Text), Text: p.Subject + "\n" + p.Text})
		}
	}
	return out
}

func (m *mailRemote) Answer(addr string, a channeltest.Answer) {
	switch a {
	case channeltest.Accept:
		m.d.refuseRcpt(addr, nil)
	case channeltest.Fail:
		m.d.refuseRcpt(addr, &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy, try later"})
	case channeltest.Refuse:
		m.d.refuseRcpt(addr, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"})
	case channeltest.Hang:
		m.d.hold(addr, true)
	default:
		m.t.Fatalf("the SMTP server cannot answer %d", a)
	}
}
