package inbox_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

// TestSignInFollowsTheDirectoryInTheBucket: a person put in the
// configuration bucket signs in to the inbox without a restart, and a
// person removed from it is signed out at their next page.
func TestSignInFollowsTheDirectoryInTheBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret})
	kv, err := svc.JetStream().KeyValue(t.Context(), svc.Names().ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	live := people.NewLive(people.Empty())
	if err := live.Watch(t.Context(), kv, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", People: live.Current})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(svc, inbox.Config{People: live.Current})
	if err != nil {
		t.Fatal(err)
	}
	in.Register(api)
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, svc: svc, base: "http://" + api.Addr(), tokens: map[string]string{}}

	ann := people.NewToken()
	v := s.visitor()
	if code, _ := v.do("POST", "/login", url.Values{"token": {ann}, "next": {"/"}}); code != http.StatusUnauthorized {
		t.Fatalf("ann, in no directory, signs in: %d", code)
	}
	rev, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: ann\n    roles: [supervisor]\n    tokenSha256: "+people.HashToken(ann)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the directory applied", func() bool { return live.Revision() == rev })
	if code, _ := v.do("POST", "/login", url.Values{"token": {ann}, "next": {"/"}}); code != http.StatusOK || v.url != "/" {
		t.Fatalf("ann, put in the bucket, signs in: %d at %s", code, v.url)
	}
	rev, err = kv.Put(t.Context(), people.Key, []byte("people: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the directory applied", func() bool { return live.Revision() == rev })
	if code, _ := v.do("GET", "/", nil); code != http.StatusOK || v.url != "/login" {
		t.Fatalf("ann, removed, still sees the inbox: %d at %s", code, v.url)
	}
}
