package mail

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/markdown"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
)

// signerPort signs links; the mail of compose needs nothing else.
type signerPort struct {
	Port
	s *links.Signer
}

func (p signerPort) Links() *links.Signer { return p.s }

func TestAHostileTitleOrRequesterCannotInjectAHeader(t *testing.T) {
	s, err := links.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	m := &Mailer{port: signerPort{s: s}, md: markdown.New(), domain: "example.com",
		cfg: Config{From: "interlock@example.com", PublicURL: "https://interlock.example.com", SubjectPrefix: "[Interlock]", LinkTTL: time.Hour}}
	in := protocol.Interrupted{Flow: "refund", Run: "r-1", RequestID: "rq-1", Kind: protocol.KindApproval, Action: "refund",
		Title:     "Refund\r\nBcc: mallory@evil.example\r\nX-Evil: 1\u2028Subject: second",
		Requester: "bot\r\nX-Evil: 2", Args: []byte(`{"a": "x\r\nBcc: mallory@evil.example"}`)}
	msg, err := m.compose(in, whyAsked, "", recipient{Person: "ann", Address: "ann@example.com"}, nil, time.Now(), "interlock.1@example.com", "", "https://interlock.example.com/decide/x.y")
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := msg.WriteTo(&raw); err != nil {
		t.Fatal(err)
	}
	parsed, err := netmail.ReadMessage(bytes.NewReader(raw.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Bcc", "X-Evil"} {
		if v := parsed.Header.Get(h); v != "" {
			t.Errorf("an injected header %s: %q", h, v)
		}
	}
	if got := parsed.Header.Get("Subject"); got != "[Interlock] Approve: Refund Bcc: mallory@evil.example X-Evil: 1 Subject: second" {
		t.Errorf("subject %q", got)
	}
	if to := parsed.Header.Get("To"); to != "<ann@example.com>" && to != "ann@example.com" {
		t.Errorf("To %q", to)
	}
	if strings.Count(raw.String(), "\r\nSubject:") != 1 {
		t.Errorf("more than one Subject header:\n%s", raw.String())
	}
}

// TestADecisionMailShowsALinksHostAndFetchesNoImage: an agent's Markdown
// in an approval's description cannot hide where a link goes behind its
// label, nor put a remote image (a tracking pixel) in Interlock's mail.
func TestADecisionMailShowsALinksHostAndFetchesNoImage(t *testing.T) {
	s, err := links.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	m := &Mailer{port: signerPort{s: s}, md: markdown.NewMail(), domain: "example.com",
		cfg: Config{From: "interlock@example.com", PublicURL: "https://interlock.example.com", SubjectPrefix: "[Interlock]", LinkTTL: time.Hour}}
	in := protocol.Interrupted{Flow: "refund", Run: "r-1", RequestID: "rq-1", Kind: protocol.KindApproval, Action: "refund", Args: []byte(`{}`),
		Description: "See [your bank's page](https://evil.example/login) first. ![logo](https://tracker.example/p.gif?u=ann)"}
	msg, err := m.compose(in, whyAsked, "", recipient{Person: "ann", Address: "ann@example.com"}, nil, time.Now(), "interlock.1@example.com", "", "https://interlock.example.com/decide/x.y")
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := msg.WriteTo(&raw); err != nil {
		t.Fatal(err)
	}
	body := decodedBody(t, raw.Bytes())
	if !strings.Contains(body, `your bank&#39;s page</a> <span>(evil.example)</span>`) {
		t.Errorf("the link's host is not shown beside its text:\n%s", body)
	}
	// The HTML part fetches nothing; the text part shows the Markdown as
	// written, address and all.
	if strings.Contains(body, "<img") || strings.Contains(body, `src="https://tracker.example`) {
		t.Errorf("the mail holds a remote image:\n%s", body)
	}
	if !strings.Contains(body, "[image: logo, from tracker.example, not shown]") {
		t.Errorf("the image is not said as text:\n%s", body)
	}
}

// decodedBody is the text of every part of a mail, each decoded.
func decodedBody(t *testing.T, raw []byte) string {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(ct string, h textproto.MIMEHeader, r io.Reader)
	walk = func(ct string, h textproto.MIMEHeader, r io.Reader) {
		media, params, err := mime.ParseMediaType(ct)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(media, "multipart/") {
			mr := multipart.NewReader(r, params["boundary"])
			for {
				p, err := mr.NextRawPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				walk(p.Header.Get("Content-Type"), p.Header, p)
			}
		}
		switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
		case "quoted-printable":
			r = quotedprintable.NewReader(r)
		case "base64":
			r = base64.NewDecoder(base64.StdEncoding, r)
		}
		part, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(part)
	}
	walk(msg.Header.Get("Content-Type"), textproto.MIMEHeader(msg.Header), msg.Body)
	return b.String()
}
