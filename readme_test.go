package interlock_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/internal/natstest"
)

// TestReadmeWalkWorksAsWritten replays the `nats pub` commands of the
// README's five-minute walk, as written there, against a real service.
func TestReadmeWalkWorksAsWritten(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	pubs := regexp.MustCompile(`nats pub (\S+) -H Nats-Msg-Id:(\S+) \\\n\s+'([^']+)'`).FindAllStringSubmatch(string(readme), -1)
	if len(pubs) != 3 {
		t.Fatalf("the README walk has %d `nats pub` commands, want 3 (start, bad answer, good answer)", len(pubs))
	}
	r := newRig(t)
	send := func(i int, replace ...string) {
		t.Helper()
		body := strings.NewReplacer(replace...).Replace(pubs[i][3])
		natstest.PublishRaw(t, r.js, pubs[i][1], []byte(body), nats.Header{"Nats-Msg-Id": {pubs[i][2]}})
	}

	send(0)
	in := r.interrupt("booking", "r-42", 1)
	if in.Node != "ask_email" {
		t.Fatalf("after the README's start the run waits at %s", in.Node)
	}
	send(1, "TOKEN", in.ResumeToken)
	in = r.interrupt("booking", "r-42", 2)
	wantContext := "ERROR: That doesn't look like an email. Politely reject generic domains like gmail.com."
	if in.Questions[0].Context != wantContext || !strings.Contains(string(readme), wantContext) {
		t.Fatalf("re-ask context %q; the README promises %q", in.Questions[0].Context, wantContext)
	}
	send(2, "NEW_TOKEN", in.ResumeToken)
	in = r.interrupt("booking", "r-42", 3)
	if in.Node != "ask_contact" || strings.Join(in.Fields(), ",") != "phone" {
		t.Fatalf("after the README's answer: %s asking %v, want ask_contact asking only phone", in.Node, in.Fields())
	}
}
