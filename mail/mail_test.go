package mail_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/mail"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// refundSchema describes the args of the refund's approval.
const refundSchema = `{"type": "object", "required": ["orderId", "amount"],
 "properties": {
  "amount": {"type": "number", "title": "Amount", "x-interlock-display": "currency"},
  "currency": {"type": "string", "title": "Currency", "enum": ["USD", "EUR"]},
  "orderId": {"type": "string", "title": "Order"},
  "customer": {"type": "string", "title": "Customer", "format": "email"},
  "note": {"type": "string", "title": "Note to the customer"}}}`

// refundState is the state of the refund flow: what to ask.
type refundState struct {
	OrderID     string   `json:"orderId"`
	Amount      float64  `json:"amount"`
	Description string   `json:"description,omitempty"`
	Note        string   `json:"note,omitempty"`
	Assignees   []string `json:"assignees,omitempty"`
	Approvers   int      `json:"approvers,omitempty"`
	RemindSoon  bool     `json:"remindSoon,omitempty"`
	Verdict     string   `json:"verdict,omitempty"`
	// Quick gives the approval a one-second deadline.
	Quick bool `json:"quick,omitempty"`
}

// refundFlow asks the finance role to approve a refund with a title, a
// Markdown description, an args schema, a requester and a deadline that
// escalates to finance_lead.
func refundFlow() *engine.Flow {
	return engine.NewFlow[refundState]("refund").
		Node("review", func(ctx context.Context, n *engine.Node[refundState]) error {
			s := n.State()
			a := engine.Approval{
				Action:       "issue_refund",
				Title:        fmt.Sprintf("Refund %s on order %s", protocol.FormatMoney(s.Amount, "USD"), s.OrderID),
				Description:  s.Description,
				Requester:    "support-bot",
				Reason:       "Refunds over $500 need finance.",
				ApproverRole: "finance",
				Assignees:    s.Assignees,
				Args: map[string]any{"orderId": s.OrderID, "amount": s.Amount, "currency": "USD",
					"customer": "dana@example.com", "note": s.Note},
				ArgsSchema: json.RawMessage(refundSchema),
				Timeout:    time.Hour,
				OnTimeout:  engine.Escalate("finance_lead", time.Hour, engine.Policy{}),
			}
			if s.Description == "" {
				a.Description = "The customer was **charged twice** for order " + s.OrderID + ".\n\nSee [the ticket](https://support.example/tickets/4821)."
			}
			if s.Quick {
				a.Timeout = time.Second
			}
			if s.Approvers > 1 {
				a.Quorum = &protocol.Quorum{Required: s.Approvers}
			}
			if s.RemindSoon {
				a.Reminders = []time.Duration{time.Hour - time.Second}
			}
			d, err := n.Approve(ctx, a)
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).
		Start("review").MustBuild()
}

// directory: two finance holders with an address, one without, a support
// person, and the finance role's own address.
const directory = `people:
  - name: ann@example.com
    roles: [finance]
    email: ann@example.com
  - name: bob
    roles: [finance]
  - name: cat
    roles: [finance]
    email: cat@example.com
  - name: dan
    roles: [support]
    email: dan@example.com
roles:
  - name: finance
    email: finance@example.com
`

// gateRules hold a large refund for the finance role.
const gateRules = `
rules:
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    title: "Refund {{args.amount}} on order {{args.orderId}}"
    reason: Refunds over $500 need finance.
    approverRole: finance
    timeout: 1h
`

// publicURL is where the tests' links point.
const publicURL = "https://interlock.example.com"

// syncBuffer is a buffer the logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a service, a mailer and a real SMTP server.
type env struct {
	t      *testing.T
	srv    *bus.Server
	svc    *interlock.Service
	smtpd  *smtpd
	cfg    mail.Config
	mailer *mail.Mailer
	log    *syncBuffer
}

// startEnv starts an SMTP server with STARTTLS (implicit TLS when
// implicit), a service of the refund flow and a mailer sending to the
// server as its user, logging at debug; change edits the mailer's
// configuration.
func startEnv(t *testing.T, implicit bool, change func(*mail.Config)) *env {
	t.Helper()
	e := &env{t: t, smtpd: startSMTPD(t, implicit), log: &syncBuffer{}}
	e.srv = natstest.StartServer(t, "")
	rs, err := gate.Parse([]byte(gateRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.svc = natstest.StartWith(t, e.srv, interlock.Config{Flows: []*engine.Flow{refundFlow()}, Secret: natstest.Secret, GateRules: rs})
	dir, err := people.Parse([]byte(directory), "test")
	if err != nil {
		t.Fatal(err)
	}
	tlsMode := mail.TLSStartTLS
	if implicit {
		tlsMode = mail.TLSImplicit
	}
	cfg, err := mail.LoadConfig("", func(k string) string {
		return map[string]string{
			mail.EnvHost: "127.0.0.1", mail.EnvPort: fmt.Sprint(e.smtpd.port()), mail.EnvTLS: tlsMode,
			mail.EnvUsername: e.smtpd.user, mail.EnvPassword: e.smtpd.pass, mail.EnvCAFile: e.smtpd.ca,
			mail.EnvFrom: "Interlock <interlock@example.com>", mail.EnvPublicURL: publicURL,
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Directory = func() *people.Directory { return dir }
	cfg.FirstRetry, cfg.MaxRetry = 50*time.Millisecond, 200*time.Millisecond
	logger := zerolog.New(e.log).Level(zerolog.DebugLevel)
	cfg.Logger = &logger
	if change != nil {
		change(&cfg)
	}
	e.cfg = cfg
	e.startMailer()
	return e
}

// startMailer starts a mailer of e's configuration, stopped at cleanup.
func (e *env) startMailer() {
	e.t.Helper()
	m, err := mail.New(e.svc, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := m.Start(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	e.mailer = m
	e.t.Cleanup(func() { _ = m.Stop(context.WithoutCancel(e.t.Context())) })
}

// start starts a refund run with state.
func (e *env) start(run string, state refundState) {
	e.t.Helper()
	b, _ := json.Marshal(state)
	var s map[string]json.RawMessage
	_ = json.Unmarshal(b, &s)
	if _, err := e.svc.Client("/test").Start(e.t.Context(), "refund", run, s, nil); err != nil {
		e.t.Fatal(err)
	}
}

// pending is the interrupt run waits on.
func (e *env) pending(run string) protocol.Interrupted {
	e.t.Helper()
	in, err := e.svc.Client("/test").LastInterrupt(e.t.Context(), "refund", run)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

// idle waits until the mailer's consumer has nothing pending or in hand,
// and no attempt waits in the retry stream.
func (e *env) idle() {
	e.t.Helper()
	names := e.svc.Names()
	natstest.Eventually(e.t, "the mailer is idle", func() bool {
		c, err := e.svc.JetStream().Consumer(e.t.Context(), names.EventStream(), mail.ConsumerName(names))
		if err != nil {
			return false
		}
		info, err := c.Info(e.t.Context())
		waiting, werr := notify.Waiting(e.t.Context(), e.svc.JetStream(), names, mail.ConsumerName(names))
		return err == nil && werr == nil && info.NumPending == 0 && info.NumAckPending == 0 && waiting == 0
	})
}

// retried waits until the mailer has tried an event at least twice.
func (e *env) retried() {
	e.t.Helper()
	names := e.svc.Names()
	// An attempt after a failure comes back through the retry stream.
	natstest.Eventually(e.t, "the mailer tried again", func() bool {
		c, err := e.svc.JetStream().Consumer(e.t.Context(), names.RetryStream(), mail.ConsumerName(names))
		if err != nil {
			return false
		}
		info, err := c.Info(e.t.Context())
		return err == nil && info.Delivered.Consumer > 0
	})
}

// deadLetter waits for the mailer's dead letter and returns its error.
func (e *env) deadLetter() string {
	e.t.Helper()
	names := e.svc.Names()
	var got string
	natstest.Eventually(e.t, "the event is dead-lettered", func() bool {
		s, err := e.svc.JetStream().Stream(e.t.Context(), names.DeadLetterStream())
		if err != nil {
			return false
		}
		m, err := s.GetLastMsgForSubject(e.t.Context(), names.DeadLetter("undeliverable"))
		if err != nil {
			return false
		}
		if m.Header.Get(bus.HeaderConsumer) != mail.ConsumerName(names) {
			e.t.Errorf("dead letter of consumer %q", m.Header.Get(bus.HeaderConsumer))
		}
		got = m.Header.Get(bus.HeaderError)
		return true
	})
	return got
}

// linkRe finds a link of the mail.
var linkRe = regexp.MustCompile(`https://interlock\.example\.com/[^\s"<>]+`)

// decisionLink returns the claims of the decision link in the mail's
// text, checked with the service's signer.
func (e *env) decisionLink(p parsed) links.Claims {
	e.t.Helper()
	link := linkRe.FindString(p.Text)
	text, ok := strings.CutPrefix(link, publicURL+"/decide/")
	if !ok {
		e.t.Fatalf("no decision link in the mail's text:\n%s", p.Text)
	}
	if !strings.Contains(p.HTML, `href="`+link+`"`) {
		e.t.Errorf("the HTML part does not link to %s", link)
	}
	c, err := e.svc.Links().Check(text, links.KindDecide, time.Now())
	if err != nil {
		e.t.Fatalf("the decision link does not check: %v", err)
	}
	return c
}

func TestAnApprovalIsMailedWithItsFactsInBothPartsAndALinkOfEachPersonsOwn(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.start("r-1", refundState{OrderID: "A-1001", Amount: 4800})
	in := e.pending("r-1")
	mails := e.smtpd.waitMails(3)
	e.idle()
	if got := len(e.smtpd.received()); got != 3 {
		t.Fatalf("%d mails, want 3 (ann, cat, the finance role's address): %+v", got, e.smtpd.received())
	}
	for _, m := range mails {
		if len(m.To) != 1 || !m.TLS || m.User != e.smtpd.user {
			t.Errorf("mail to %v: TLS %v, authenticated as %q; want one recipient, over STARTTLS, as %q", m.To, m.TLS, m.User, e.smtpd.user)
		}
	}
	ids := map[string]bool{}
	for _, person := range []string{"ann@example.com", "cat"} {
		addr := map[string]string{"ann@example.com": "ann@example.com", "cat": "cat@example.com"}[person]
		got := e.smtpd.to(addr)
		if len(got) != 1 {
			t.Fatalf("%d mails to %s, want 1", len(got), addr)
		}
		p := parseMail(t, got[0].Raw)
		if p.Subject != "[Interlock] Approve: Refund $4,800.00 on order A-1001" {
			t.Errorf("subject %q", p.Subject)
		}
		for _, want := range []string{"Refund $4,800.00 on order A-1001", "Amount: $4,800.00", "Order: A-1001", "Customer: dana@example.com",
			"Requested by support-bot", "charged twice", "Decide by ", " UTC; then it goes to finance_lead.", "Why: Refunds over $500 need finance."} {
			if !strings.Contains(p.Text, want) {
				t.Errorf("the text to %s lacks %q:\n%s", addr, want, p.Text)
			}
		}
		for _, want := range []string{"<strong>charged twice</strong>", "<strong>$4,800.00</strong>", "support-bot",
			`<a href="https://support.example/tickets/4821" rel="nofollow noopener" target="_blank">the ticket</a>`, "then it goes to finance_lead", "Review and decide"} {
			if !strings.Contains(p.HTML, want) {
				t.Errorf("the HTML to %s lacks %q", addr, want)
			}
		}
		c := e.decisionLink(p)
		if c.Person != person || c.Flow != "refund" || c.Run != "r-1" || c.RequestID != in.RequestID || !c.ExpiresAt().Equal(in.ExpiresAt.Truncate(time.Second)) {
			t.Errorf("the link to %s grants %+v; want %s, refund r-1 %s until %s", addr, c, person, in.RequestID, in.ExpiresAt)
		}
		id := p.Header.Get("Message-Id")
		if !strings.HasPrefix(id, "<interlock.") || !strings.HasSuffix(id, "@example.com>") || ids[id] {
			t.Errorf("Message-ID %q: want a stable one of Interlock's per recipient", id)
		}
		ids[id] = true
		if p.Header.Get("In-Reply-To") != "" {
			t.Errorf("the first mail of the run answers %q", p.Header.Get("In-Reply-To"))
		}
	}
	role := e.smtpd.to("finance@example.com")
	if len(role) != 1 {
		t.Fatalf("%d mails to the finance role's address, want 1", len(role))
	}
	p := parseMail(t, role[0].Raw)
	if strings.Contains(p.Text, "/decide/") || !strings.Contains(p.Text, publicURL+"/runs/refund/r-1") || !strings.Contains(p.HTML, "Open it in the inbox") {
		t.Errorf("the role's address gets a decision link, or no link to the run in the inbox:\n%s", p.Text)
	}
}

func TestAssigneesAreMailedAndNotTheRolesHoldersOrAddress(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.start("r-2", refundState{OrderID: "A-2", Amount: 900, Assignees: []string{"dan", "bob"}})
	in := e.pending("r-2")
	e.smtpd.waitMails(1)
	e.idle()
	got := e.smtpd.received()
	if len(got) != 1 || got[0].To[0] != "dan@example.com" {
		t.Fatalf("mails to %+v, want one to dan (bob has no address)", got)
	}
	if c := e.decisionLink(parseMail(t, got[0].Raw)); c.Person != "dan" || c.RequestID != in.RequestID {
		t.Errorf("dan's link grants %+v", c)
	}
}

// The engine refuses a title of more than one line; compose_test.go
// checks the mail of one all the same.
func TestAHostileDescriptionOrArgumentCannotInjectAHeaderOrMarkup(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	hostile := "Refund **now**.\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[ticket](javascript:alert(3))\n\n<a href=\"https://evil.example/\" onmouseover=\"alert(4)\">raw</a>"
	huge := strings.Repeat("<b>x</b>\r\nBcc: mallory@evil.example\r\n", 1500)
	e.start("r-evil", refundState{OrderID: "A-3", Amount: 700, Description: hostile, Note: huge})
	e.smtpd.waitMails(3)
	e.idle()
	for _, m := range e.smtpd.received() {
		if len(m.To) != 1 || strings.Contains(m.To[0], "evil") {
			t.Errorf("a mail went to %v", m.To)
		}
		if len(m.Raw) > 200<<10 {
			t.Errorf("a mail of %d bytes: the huge argument is not cut", len(m.Raw))
		}
		head := m.Raw[:strings.Index(m.Raw, "\r\n\r\n")]
		for _, line := range strings.Split(head, "\r\n") {
			if strings.HasPrefix(strings.ToLower(line), "bcc:") || strings.HasPrefix(strings.ToLower(line), "x-evil:") {
				t.Errorf("an injected header: %q", line)
			}
		}
		p := parseMail(t, m.Raw)
		if strings.ContainsAny(p.Subject, "\r\n") || p.Subject != "[Interlock] Approve: Refund $700.00 on order A-3" {
			t.Errorf("subject %q", p.Subject)
		}
		if !strings.Contains(p.HTML, "<strong>now</strong>") {
			t.Errorf("the description's Markdown is not rendered")
		}
		lower := strings.ToLower(p.HTML)
		for _, bad := range []string{"<script", "onerror", "javascript:", "onmouseover", "<b>x</b>", "<img"} {
			if strings.Contains(lower, bad) {
				t.Errorf("the HTML holds %q", bad)
			}
		}
		if !strings.Contains(p.HTML, "&lt;b&gt;x&lt;/b&gt;") || !strings.Contains(p.Text, "…") {
			t.Errorf("the huge argument is not shown escaped and cut")
		}
	}
}

func TestTheSMTPServerDownForAWhileThenBackGetsEachMailOnce(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	addr := e.smtpd.addr
	e.smtpd.stop()
	e.start("r-down", refundState{OrderID: "A-4", Amount: 600})
	e.retried()
	e.smtpd.start(addr)
	e.smtpd.waitMails(3)
	e.idle()
	if got := e.smtpd.received(); len(got) != 3 {
		t.Fatalf("%d mails after the server came back, want 3 (each once)", len(got))
	}
	for _, a := range []string{"ann@example.com", "cat@example.com", "finance@example.com"} {
		if n := len(e.smtpd.to(a)); n != 1 {
			t.Errorf("%d mails to %s, want 1", n, a)
		}
	}
}

func TestARestartWhileAMailIsRetriedSendsItOnce(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	addr := e.smtpd.addr
	// ann's mail goes out; cat's waits for a server that takes it.
	e.smtpd.refuseRcpt("cat@example.com", &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"})
	e.start("r-restart", refundState{OrderID: "A-5", Amount: 650})
	e.retried()
	if err := e.mailer.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.smtpd.stop()
	e.smtpd.refuseRcpt("cat@example.com", nil)
	e.svc = natstest.Start(t, e.srv, refundFlow())
	e.startMailer()
	e.smtpd.start(addr)
	e.smtpd.waitMails(3)
	e.idle()
	for _, a := range []string{"ann@example.com", "cat@example.com", "finance@example.com"} {
		if n := len(e.smtpd.to(a)); n != 1 {
			t.Errorf("%d mails to %s across the restart, want 1", n, a)
		}
	}
}

func TestARecipientRefusedForGoodIsDeadLetteredWithTheSMTPErrorWhileTheOthersGetTheirs(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.smtpd.refuseRcpt("ann@example.com", &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox here"})
	e.start("r-550", refundState{OrderID: "A-6", Amount: 800})
	detail := e.deadLetter()
	for _, want := range []string{"ann@example.com", "550", "no such mailbox here"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the dead letter says %q; want it to name %q", detail, want)
		}
	}
	e.idle()
	if len(e.smtpd.to("cat@example.com")) != 1 || len(e.smtpd.to("finance@example.com")) != 1 || len(e.smtpd.received()) != 2 {
		t.Errorf("mails %+v; want one to cat and one to the finance role", e.smtpd.received())
	}
}

func TestAMailThatKeepsFailingIsDeadLetteredWithTheSMTPErrorAfterRetryFor(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, func(c *mail.Config) { c.RetryFor = 2 * time.Second })
	for _, a := range []string{"ann@example.com", "cat@example.com", "finance@example.com"} {
		e.smtpd.refuseRcpt(a, &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "mailbox full"})
	}
	e.start("r-452", refundState{OrderID: "A-7", Amount: 800})
	detail := e.deadLetter()
	if !strings.Contains(detail, "452") || !strings.Contains(detail, "mailbox full") {
		t.Errorf("the dead letter says %q; want the SMTP error", detail)
	}
	if n := len(e.smtpd.received()); n != 0 {
		t.Errorf("%d mails accepted", n)
	}
}

func TestImplicitTLSDeliversTheMail(t *testing.T) {
	t.Parallel()
	e := startEnv(t, true, nil)
	e.start("r-465", refundState{OrderID: "A-8", Amount: 800, Assignees: []string{"cat"}})
	m := e.smtpd.waitMails(1)[0]
	if !m.TLS || m.User != e.smtpd.user || m.To[0] != "cat@example.com" {
		t.Errorf("mail %+v: want cat's, over TLS, authenticated", m)
	}
}

func TestTheCredentialsAreNeverLogged(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.start("r-log", refundState{OrderID: "A-9", Amount: 800})
	e.smtpd.waitMails(3)
	e.idle()
	logged := e.log.String()
	if !strings.Contains(logged, "notify: sent") {
		t.Fatalf("the debug log says nothing of the mails sent:\n%s", logged)
	}
	plain := base64.StdEncoding.EncodeToString([]byte("\x00" + e.smtpd.user + "\x00" + e.smtpd.pass))
	for _, secret := range []string{e.smtpd.pass, plain, "/decide/"} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logged)
		}
	}
}

func TestAVoteRequestAndAReminderAnswerTheFirstMailOfTheRun(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.start("r-q", refundState{OrderID: "A-10", Amount: 5000, Approvers: 2, RemindSoon: true})
	first := map[string]string{}
	for _, a := range []string{"ann@example.com", "cat@example.com"} {
		natstest.Eventually(t, "the first mail to "+a, func() bool { return len(e.smtpd.to(a)) >= 1 })
		first[a] = parseMail(t, e.smtpd.to(a)[0].Raw).Header.Get("Message-Id")
	}
	in := e.pending("r-q")
	c := e.svc.Client("/test")
	if _, err := e.svc.ResumeAs(t.Context(), c, "refund", "r-q", protocol.Resume{RequestID: in.RequestID, Decision: "approve"}, "ann@example.com", []string{"finance"}); err != nil {
		t.Fatal(err)
	}
	// cat gets the vote request and the reminder, ann (who voted) the
	// reminder only if it reaches her: the reminder goes to the role.
	natstest.Eventually(t, "cat's vote request and reminder", func() bool { return len(e.smtpd.to("cat@example.com")) >= 3 })
	var vote, reminder bool
	for _, m := range e.smtpd.to("cat@example.com")[1:] {
		p := parseMail(t, m.Raw)
		if got := p.Header.Get("In-Reply-To"); got != first["cat@example.com"] || p.Header.Get("References") != got {
			t.Errorf("%q answers %q, want cat's first mail %s", p.Subject, got, first["cat@example.com"])
		}
		switch {
		case strings.HasPrefix(p.Subject, "[Interlock] Approve (1 of 2 approvals): Refund $5,000.00"):
			vote = true
			if !strings.Contains(p.Text, "1 of 2 approvals so far") || !strings.Contains(p.Text, "ann@example.com (approve)") {
				t.Errorf("the vote request does not show the votes:\n%s", p.Text)
			}
			if l := e.decisionLink(p); l.RequestID == in.RequestID || l.Person != "cat" {
				t.Errorf("the vote request's link grants %+v; want cat, the new request", l)
			}
		case strings.HasPrefix(p.Subject, "[Interlock] Reminder: Approve"):
			reminder = true
		}
	}
	if !vote || !reminder {
		t.Errorf("cat got a vote request %v, a reminder %v; want both", vote, reminder)
	}
}

func TestADelegationMailsThePersonItWentTo(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	e.start("r-d", refundState{OrderID: "A-11", Amount: 900, Assignees: []string{"cat"}})
	e.smtpd.waitMails(1)
	in := e.pending("r-d")
	c := e.svc.Client("/test")
	if _, err := e.svc.AssignAs(t.Context(), c, "refund", "r-d", protocol.Assign{RequestID: in.RequestID, Op: "delegate", To: "ann@example.com"}, "cat", []string{"finance"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "ann's mail", func() bool { return len(e.smtpd.to("ann@example.com")) == 1 })
	p := parseMail(t, e.smtpd.to("ann@example.com")[0].Raw)
	if !strings.HasPrefix(p.Subject, "[Interlock] Delegated to you: Approve: Refund $900.00") || !strings.Contains(p.Text, "cat delegated this approval to you.") {
		t.Errorf("subject %q, text:\n%s", p.Subject, p.Text)
	}
	if l := e.decisionLink(p); l.Person != "ann@example.com" || l.RequestID != in.RequestID {
		t.Errorf("ann's link grants %+v", l)
	}
}

func TestTheTryServerPrintsEachMailsRecipientSubjectAndLink(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	ts, err := mail.StartTryServer(&out)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, refundFlow())
	dir, _ := people.Parse([]byte(directory), "test")
	cfg := ts.Config("http://127.0.0.1:8080")
	cfg.Directory = func() *people.Directory { return dir }
	m, err := mail.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.WithoutCancel(t.Context()))
	b, _ := json.Marshal(refundState{OrderID: "A-12", Amount: 4800, Assignees: []string{"ann@example.com"}})
	var s map[string]json.RawMessage
	_ = json.Unmarshal(b, &s)
	if _, err := svc.Client("/test").Start(t.Context(), "refund", "r-try", s, nil); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the try server prints the mail", func() bool { return strings.Contains(out.String(), "open: ") })
	got := out.String()
	if !strings.Contains(got, "Mail to ann@example.com: [Interlock] Approve: Refund $4,800.00 on order A-12\n") {
		t.Errorf("the try server printed:\n%s", got)
	}
	link := regexp.MustCompile(`open: http://127\.0\.0\.1:8080/decide/(\S+)`).FindStringSubmatch(got)
	if link == nil {
		t.Fatalf("no decision link printed:\n%s", got)
	}
	if c, err := svc.Links().Check(link[1], links.KindDecide, time.Now()); err != nil || c.Person != "ann@example.com" {
		t.Errorf("the printed link: %+v, %v", c, err)
	}
}

// The package's errors never hold the password.
func TestAConfigurationErrorNeverHoldsThePassword(t *testing.T) {
	t.Parallel()
	_, err := mail.LoadConfig("", func(k string) string {
		return map[string]string{mail.EnvHost: "smtp.example.com", mail.EnvTLS: "none", mail.EnvUsername: "u", mail.EnvPassword: "hunter2-secret",
			mail.EnvFrom: "a@example.com", mail.EnvPublicURL: publicURL}[k]
	})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

// messages are the conversation an agent sends with its call: the
// customer's words, with markup that must reach the mail as text.
const messages = `[{"role": "user", "content": "I was charged twice for order A-77 <b>please</b> help"},
 {"role": "assistant", "content": [{"type": "text", "text": "I will ask finance for a refund."}]}]`

func TestTheConversationBehindAGateCallOrAnAskIsMailed(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	c := e.svc.Client("/test")
	if _, err := c.AskTool(t.Context(), protocol.ToolRequest{CallID: "call-77", Tool: "issue_refund", Agent: "support-bot", ConversationID: "conv-77",
		Args: map[string]json.RawMessage{"orderId": json.RawMessage(`"A-77"`), "amount": json.RawMessage("900")}, Messages: json.RawMessage(messages)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AskNoWait(t.Context(), protocol.AskRequest{AskID: "ask-78", Agent: "support-bot", ConversationID: "conv-78", Messages: json.RawMessage(messages),
		Interrupt: protocol.AskInterrupt{Kind: "approval", Title: "Refund $900 on order A-78", Action: "issue_refund", Args: json.RawMessage(`{"orderId": "A-78", "amount": 900}`),
			ApproverRole: "finance"}}, 0); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "two mails to ann", func() bool { return len(e.smtpd.to("ann@example.com")) >= 2 })
	for _, m := range e.smtpd.to("ann@example.com") {
		p := parseMail(t, m.Raw)
		conv := "conv-77"
		if strings.Contains(p.Subject, "A-78") {
			conv = "conv-78"
		}
		for part, body := range map[string]string{"text": p.Text, "HTML": p.HTML} {
			if !strings.Contains(body, "The conversation that led here") || !strings.Contains(body, conv) || !strings.Contains(body, "support-bot") ||
				!strings.Contains(body, "I will ask finance for a refund.") || !strings.Contains(body, "charged twice for order A-77") {
				t.Errorf("%q: the %s part does not show the conversation %s:\n%s", p.Subject, part, conv, body)
			}
		}
		if strings.Contains(p.HTML, "<b>please</b>") || !strings.Contains(p.HTML, "&lt;b&gt;please&lt;/b&gt;") {
			t.Errorf("%q: the HTML part does not show the customer's markup as text", p.Subject)
		}
	}
}

func TestAnEscalationIsMailedToTheRoleItGoesTo(t *testing.T) {
	t.Parallel()
	const dir = directory + `  - name: finance_lead
    email: leads@example.com
`
	e := startEnv(t, false, func(c *mail.Config) {
		d, err := people.Parse([]byte(dir), "test")
		if err != nil {
			t.Fatal(err)
		}
		c.Directory = func() *people.Directory { return d }
	})
	// The deadline passes after a second: the approval goes to
	// finance_lead.
	e.start("r-esc", refundState{OrderID: "A-90", Amount: 900, Quick: true})
	natstest.Eventually(t, "the finance role's mail", func() bool { return len(e.smtpd.to("finance@example.com")) >= 1 })
	natstest.Eventually(t, "finance_lead's mail", func() bool { return len(e.smtpd.to("leads@example.com")) >= 1 })
	p := parseMail(t, e.smtpd.to("leads@example.com")[0].Raw)
	if !strings.Contains(p.Subject, "Refund $900.00 on order A-90") || !strings.Contains(p.Text, "finance_lead") {
		t.Errorf("the escalation's mail: %q\n%s", p.Subject, p.Text)
	}
}

func TestAQuorumIsNotMailedToWhoStartedItsRun(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	b, _ := json.Marshal(refundState{OrderID: "A-11", Amount: 5000, Approvers: 2})
	var s map[string]json.RawMessage
	_ = json.Unmarshal(b, &s)
	// cat, who holds finance, starts the refund: she may not vote on it.
	if _, err := e.svc.Client("/test").As("cat").Start(t.Context(), "refund", "r-cat", s, nil); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "ann's mail", func() bool { return len(e.smtpd.to("ann@example.com")) >= 1 })
	e.idle()
	if got := e.smtpd.to("cat@example.com"); len(got) != 0 {
		t.Errorf("cat, who started the run, got %d mails asking her vote", len(got))
	}
}

// TestAnApprovalSettledWhileTheMailerWasStoppedIsMailedToNobody: after a
// pause (a restart, mail turned on again), the backlog of interrupts
// mails only what still waits: an approval decided meanwhile is not
// announced as waiting on anyone.
func TestAnApprovalSettledWhileTheMailerWasStoppedIsMailedToNobody(t *testing.T) {
	t.Parallel()
	e := startEnv(t, false, nil)
	if err := e.mailer.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.start("r-settled", refundState{OrderID: "A-7001", Amount: 4800})
	in := e.pending("r-settled")
	if ev, err := e.svc.ResumeAs(t.Context(), e.svc.Client("/test"), "refund", "r-settled",
		protocol.Resume{RequestID: in.RequestID, Decision: "reject", Reason: "duplicate"}, "ann@example.com", []string{in.ApproverRole}); err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("rejecting: %s %v", ev.Kind, err)
	}
	e.start("r-waits", refundState{OrderID: "A-7002", Amount: 4800})
	e.pending("r-waits")
	e.startMailer()
	e.smtpd.waitMails(3)
	e.idle()
	for _, m := range e.smtpd.received() {
		if p := parseMail(t, m.Raw); strings.Contains(p.Subject, "A-7001") {
			t.Errorf("the settled approval was mailed to %v: %q", m.To, p.Subject)
		}
	}
	if got := len(e.smtpd.received()); got != 3 {
		t.Fatalf("%d mails, want the 3 of the approval that still waits", got)
	}
}
