package mail

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// maxTryMessage bounds a mail the try server takes.
const maxTryMessage = 4 << 20

// TryServer is an SMTP server on loopback for trying Interlock out: it
// takes every mail, keeps none, and prints who it is for, its subject
// and its link. It needs no authentication and no TLS, and listens on
// loopback only.
type TryServer struct {
	srv  *smtp.Server
	ln   net.Listener
	out  io.Writer
	mu   sync.Mutex // serializes writes to out
	done chan struct{}
	once sync.Once
}

// StartTryServer starts a try server on a free port of 127.0.0.1,
// printing to out.
func StartTryServer(out io.Writer) (*TryServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mail: listening for the try SMTP server: %w", err)
	}
	s := &TryServer{ln: ln, out: out, done: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &trySession{s: s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.MaxMessageBytes = maxTryMessage
	s.srv.MaxRecipients = 10
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Config is a mailer's configuration that sends to the try server, with
// links to publicURL.
func (s *TryServer) Config(publicURL string) Config {
	addr := s.ln.Addr().(*net.TCPAddr)
	return Config{Host: "127.0.0.1", Port: addr.Port, TLS: TLSNone, From: "interlock@localhost", PublicURL: publicURL}
}

// Addr is the server's host:port.
func (s *TryServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server. Closing twice is safe.
func (s *TryServer) Close() error {
	s.once.Do(func() {
		_ = s.srv.Close()
		<-s.done
	})
	return nil
}

// trySession is one SMTP session with the try server.
type trySession struct {
	s  *TryServer
	to []string
}

func (t *trySession) Reset()        { t.to = nil }
func (t *trySession) Logout() error { return nil }
func (t *trySession) Mail(string, *smtp.MailOptions) error {
	return nil
}

func (t *trySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	t.to = append(t.to, to)
	return nil
}

func (t *trySession) Data(r io.Reader) error {
	subject, links, err := readTryMail(r)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "the try server cannot read this mail: " + err.Error()}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Mail to %s: %s\n", strings.Join(t.to, ", "), subject)
	for _, l := range links {
		fmt.Fprintf(&b, "  open: %s\n", l)
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	_, _ = io.WriteString(t.s.out, b.String())
	return nil
}

// linkRe finds a decision link, or a link to a run in the inbox, in the
// plain text of a mail.
var linkRe = regexp.MustCompile(`https?://[^\s<>"]+/(?:decide|runs)/[^\s<>"]+`)

// readTryMail reads the subject of a mail and the links of its plain
// text part.
func readTryMail(r io.Reader) (subject string, links []string, err error) {
	msg, err := netmail.ReadMessage(io.LimitReader(r, maxTryMessage))
	if err != nil {
		return "", nil, err
	}
	subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject")
	}
	text, err := plainPart(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
		return subject, nil, err
	}
	return subject, linkRe.FindAllString(text, -1), nil
}

// plainPart is the text/plain part of a body, decoded.
func plainPart(contentType, encoding string, body io.Reader) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", fmt.Errorf("content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			text, err := plainPart(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p)
			if err != nil || text != "" {
				return text, err
			}
		}
	}
	if mt != "text/plain" {
		return "", nil
	}
	if strings.EqualFold(encoding, "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	return string(b), err
}
