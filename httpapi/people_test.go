package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

// startAPIOnPeople starts a service of the example flows with an HTTP API
// whose callers authenticate against a people.Live watching the service's
// configuration bucket, and returns the API and the bucket.
func startAPIOnPeople(t *testing.T, initial *people.Directory) (*api, people.ConfigKV) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret})
	kv, err := svc.JetStream().KeyValue(t.Context(), svc.Names().ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	live := people.NewLive(initial)
	if err := live.Watch(t.Context(), kv, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })
	s, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", People: live.Current})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return &api{t: t, svc: svc, server: s, base: "http://" + s.Addr()}, kv
}

// statusOf is the status of GET /v1/interrupts as the caller of a.
func statusOf(a *api) int { return a.do("GET", "/v1/interrupts", nil).status }

// waitStatus polls GET /v1/interrupts as a until it answers want.
func waitStatus(t *testing.T, a *api, want int) {
	t.Helper()
	natstest.Eventually(t, fmt.Sprintf("GET /v1/interrupts answering %d", want), func() bool { return statusOf(a) == want })
}

// TestAPersonPutInTheBucketCallsTheAPIWithoutARestart is `nats kv put
// interlock_config people`: a person added can call the API at once, and
// one removed no longer can.
func TestAPersonPutInTheBucketCallsTheAPIWithoutARestart(t *testing.T) {
	t.Parallel()
	sam, bob := people.NewToken(), people.NewToken()
	initial, err := people.New("people.yaml", []people.Person{{Name: "sam@example.com", Roles: []string{"supervisor"}, TokenSHA256: people.HashToken(sam)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, kv := startAPIOnPeople(t, initial)
	if got := statusOf(a.as(sam)); got != http.StatusOK {
		t.Fatalf("sam, in the directory, gets %d", got)
	}
	if got := statusOf(a.as(bob)); got != http.StatusUnauthorized {
		t.Fatalf("bob, in no directory, gets %d", got)
	}
	if got := statusOf(a); got != http.StatusUnauthorized {
		t.Fatalf("no token gets %d", got)
	}

	both := "people:\n  - name: sam@example.com\n    roles: [supervisor]\n    tokenSha256: " + people.HashToken(sam) +
		"\n  - name: bob\n    tokenSha256: " + people.HashToken(bob) + "\n"
	if _, err := kv.Put(t.Context(), people.Key, []byte(both)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a.as(bob), http.StatusOK)

	if _, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: bob\n    tokenSha256: "+people.HashToken(bob)+"\n")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a.as(sam), http.StatusUnauthorized)
	if got := statusOf(a.as(bob)); got != http.StatusOK {
		t.Fatalf("bob, still in the directory, gets %d", got)
	}

	// An empty directory is one of nobody, not the local user's.
	if _, err := kv.Put(t.Context(), people.Key, []byte("people: []\n")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a.as(bob), http.StatusUnauthorized)
	if got := statusOf(a); got != http.StatusUnauthorized {
		t.Fatalf("no token, with an empty directory, gets %d", got)
	}
}

// TestWithoutADirectoryTheLocalUserCallsOnLoopbackOnly: a people.Live
// that holds no directory yet leaves every caller the local user, and
// only on loopback; the first directory put in the bucket ends that.
func TestWithoutADirectoryTheLocalUserCallsOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	none := func() *people.Directory { return nil }
	if err := (httpapi.Config{Addr: "0.0.0.0:0", People: none}).Validate(); !errors.Is(err, httpapi.ErrNoAuth) {
		t.Fatalf("beyond loopback with no directory: %v, want ErrNoAuth", err)
	}
	if err := (httpapi.Config{Addr: "0.0.0.0:0", People: people.Empty}).Validate(); err != nil {
		t.Fatalf("beyond loopback with an empty directory: %v", err)
	}
	a, kv := startAPIOnPeople(t, nil)
	if got := statusOf(a); got != http.StatusOK {
		t.Fatalf("the local user, without a directory, gets %d", got)
	}
	if r := a.do("GET", "/v1/interrupts", nil, "Host", "example.com"); r.status != http.StatusForbidden {
		t.Fatalf("a request to another host, without a directory, gets %d", r.status)
	}
	ann := people.NewToken()
	if _, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: ann\n    tokenSha256: "+people.HashToken(ann)+"\n")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, http.StatusUnauthorized)
	if got := statusOf(a.as(ann)); got != http.StatusOK {
		t.Fatalf("ann gets %d", got)
	}
}
