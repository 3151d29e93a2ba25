package mail_test

import (
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/interlockhq/interlock/internal/natstest"
)

// smtpd is a real SMTP server on loopback for the tests (go-smtp): it
// offers STARTTLS (or speaks implicit TLS) with the test CA's certificate,
// takes AUTH PLAIN only over TLS and only with its user and password, and
// keeps every mail it accepts. It can be stopped and started again on the
// same address, and told to refuse some recipients.
type smtpd struct {
	t        *testing.T
	addr     string
	tls      *tls.Config
	implicit bool
	user     string
	pass     string
	// ca is the file of the CA that signed the server's certificate.
	ca string

	mu     sync.Mutex
	srv    *smtp.Server
	done   chan struct{}
	mails  []received
	refuse map[string]*smtp.SMTPError
	// hang holds the recipients whose RCPT TO is left unanswered until
	// released is closed (by refuseRcpt or hold for them, or cleanup).
	hang     map[string]bool
	released chan struct{}
}

// received is a mail the server accepted.
type received struct {
	From string
	To   []string
	Raw  string
	TLS  bool
	User string
}

func startSMTPD(t *testing.T, implicit bool) *smtpd {
	t.Helper()
	files := natstest.TLS(t)
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	d := &smtpd{t: t, tls: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, implicit: implicit,
		user: "interlock", pass: "s3cret-Pa55-never-logged", ca: files.CA, refuse: map[string]*smtp.SMTPError{},
		hang: map[string]bool{}, released: make(chan struct{})}
	d.start("127.0.0.1:0")
	t.Cleanup(d.stop)
	t.Cleanup(func() { d.hold("", false) })
	return d
}

func (d *smtpd) start(addr string) {
	d.t.Helper()
	var ln net.Listener
	var err error
	// The address of a stopped server is taken again as soon as the
	// kernel lets it go.
	natstest.Eventually(d.t, "the SMTP server's address free to listen on again", func() bool {
		if d.implicit {
			ln, err = tls.Listen("tcp", addr, d.tls)
		} else {
			ln, err = net.Listen("tcp", addr)
		}
		return err == nil
	})
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{d: d, conn: c}, nil }))
	srv.Domain = "localhost"
	srv.TLSConfig = d.tls
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	done := make(chan struct{})
	d.mu.Lock()
	d.srv, d.done, d.addr = srv, done, ln.Addr().String()
	d.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
}

// stop closes the server: connections are refused until start.
func (d *smtpd) stop() {
	d.mu.Lock()
	srv, done := d.srv, d.done
	d.srv = nil
	d.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-done
	}
}

func (d *smtpd) port() int {
	_, p, _ := net.SplitHostPort(d.addr)
	var n int
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}

// refuseRcpt makes the server answer RCPT TO addr with err (nil: take
// it), and lets go of a RCPT TO of addr held unanswered.
func (d *smtpd) refuseRcpt(addr string, err *smtp.SMTPError) {
	d.hold(addr, false)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.refuse, strings.ToLower(addr))
		return
	}
	d.refuse[strings.ToLower(addr)] = err
}

// hold makes the server leave RCPT TO addr unanswered (on), or lets go
// of those held (off); addr "" lets go of every one.
func (d *smtpd) hold(addr string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	addr = strings.ToLower(addr)
	if on {
		d.hang[addr] = true
		return
	}
	if addr == "" {
		clear(d.hang)
	} else {
		delete(d.hang, addr)
	}
	close(d.released)
	d.released = make(chan struct{})
}

// received returns the mails accepted so far.
func (d *smtpd) received() []received {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]received(nil), d.mails...)
}

// waitMails waits until the server accepted n mails, and returns them.
func (d *smtpd) waitMails(n int) []received {
	d.t.Helper()
	natstest.Eventually(d.t, "the SMTP server has the mails", func() bool { return len(d.received()) >= n })
	return d.received()
}

// to returns the mails accepted for addr.
func (d *smtpd) to(addr string) []received {
	var out []received
	for _, m := range d.received() {
		for _, to := range m.To {
			if strings.EqualFold(to, addr) {
				out = append(out, m)
			}
		}
	}
	return out
}

// session is one SMTP session with smtpd.
type session struct {
	d    *smtpd
	conn *smtp.Conn
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != s.d.user || password != s.d.pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.user = username
		return nil
	}), nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	for {
		s.d.mu.Lock()
		held, released := s.d.hang[strings.ToLower(to)], s.d.released
		s.d.mu.Unlock()
		if !held {
			break
		}
		<-released
	}
	s.d.mu.Lock()
	err := s.d.refuse[strings.ToLower(to)]
	s.d.mu.Unlock()
	if err != nil {
		return err
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, encrypted := s.conn.TLSConnectionState()
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.mails = append(s.d.mails, received{From: s.from, To: s.to, Raw: string(b), User: s.user, TLS: encrypted})
	return nil
}

// parsed is a mail read back: its header and both parts, decoded.
type parsed struct {
	Header     netmail.Header
	Subject    string
	Text, HTML string
}

func parseMail(t *testing.T, raw string) parsed {
	t.Helper()
	msg, err := netmail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("reading the mail: %v\n%s", err, raw)
	}
	p := parsed{Header: msg.Header}
	if p.Subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatalf("subject %q: %v", msg.Header.Get("Subject"), err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q, want multipart/alternative (%v)", msg.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = part
		if strings.EqualFold(part.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(part)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			p.Text = string(b)
		case "text/html":
			p.HTML = string(b)
		}
	}
	if p.Text == "" || p.HTML == "" {
		t.Fatalf("the mail lacks its text or its HTML part:\n%s", raw)
	}
	return p
}
