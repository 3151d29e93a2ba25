package slackbridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/slackbridge"
)

// TestTheDirectoryOfPeopleMapsSlackUsersAndRoleChannels: a Slack user the
// directory knows decides as the directory's person, and a role's
// approvals go to the role's channel of the directory rather than the
// configuration's.
func TestTheDirectoryOfPeopleMapsSlackUsersAndRoleChannels(t *testing.T) {
	t.Parallel()
	dir, err := people.New("people.yaml", []people.Person{{Name: "eve@example.com", Roles: []string{refund.SupervisorRole}, Slack: stranger}},
		[]people.Role{{Name: refund.SupervisorRole, Slack: "CDIRECTORY"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	h := &harness{t: t, svc: natstest.Start(t, srv, refund.Flow()), slack: newFakeSlack(t)}
	h.cfg = slackbridge.Config{
		Token: "xoxb-test", SigningSecret: secret, Addr: "127.0.0.1:0", APIURL: h.slack.srv.URL + "/api/", Egress: fakeSlackAllowed,
		Channels: map[string]string{refund.SupervisorRole: channelSup},
		People:   func() *people.Directory { return dir },
	}
	h.start()
	run := h.refund("")
	msg := h.slack.wait(t, "chat.postMessage", 1)[0]
	if got := msg.Form.Get("channel"); got != "CDIRECTORY" {
		t.Fatalf("posted in %q, want the directory's channel of the role", got)
	}
	h.send(click(stranger, "interlock_approve", msg), time.Now(), secret)
	h.waitStatus(refund.Name, run, "completed")
	if rec := h.audit(run, "approved"); rec.By != "eve@example.com" || !rec.Trusted {
		t.Errorf("approved by %q (trusted %v), want the directory's eve@example.com", rec.By, rec.Trusted)
	}
	// A Slack user nobody knows is still refused.
	run = h.refund("")
	msg = h.slack.wait(t, "chat.postMessage", 2)[1]
	h.send(click(supervisor, "interlock_approve", msg), time.Now(), secret)
	if eph := h.slack.wait(t, "chat.postEphemeral", 1)[0]; eph.Form.Get("user") != supervisor || !strings.Contains(eph.Form.Get("text"), "not set up") {
		t.Errorf("ephemeral to %s: %q", eph.Form.Get("user"), eph.Form.Get("text"))
	}
	if got := h.status(refund.Name, run); got != "waiting" {
		t.Errorf("run %s, want waiting", got)
	}
}

func TestConfigDirectoryIsTheUsersAndChannels(t *testing.T) {
	t.Parallel()
	cfg := slackbridge.Config{
		Channels: map[string]string{"supervisor": "C0SUP"},
		Users:    map[string]slackbridge.User{"U0ANN": {Name: "ann@example.com", Roles: []string{"supervisor"}}},
	}
	d, err := cfg.Directory("slack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := d.BySlack("U0ANN"); !ok || p.Name != "ann@example.com" || !p.Holds("supervisor") {
		t.Errorf("BySlack = %+v, %v", p, ok)
	}
	if r, _ := d.Role("supervisor"); r.Slack != "C0SUP" {
		t.Errorf("Role = %+v", r)
	}
	cfg.Users["U0BOB"] = slackbridge.User{Name: "Bob Smith"}
	if _, err := cfg.Directory("slack.yaml"); err == nil || !strings.Contains(err.Error(), "users[U0BOB]") || !strings.Contains(err.Error(), "rename them") {
		t.Errorf("a user whose name is not a person's: %v", err)
	}
}
