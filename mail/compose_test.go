package mail

import (
	"bytes"
	netmail "net/mail"
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
	msg, err := m.compose(in, whyAsked, "", recipient{Person: "ann", Address: "ann@example.com"}, nil, time.Now(), "interlock.1@example.com", "")
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
