package links_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/wire"
)

func openUses(t *testing.T) *links.Uses {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	n, _ := wire.NewNames("")
	u, err := links.OpenUses(t.Context(), js, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestALinkIsClaimedOnceOfManyRacingRequests(t *testing.T) {
	u := openUses(t)
	c := claims()
	c.ID = links.NewID()
	const racers = 8
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		won, refused int
	)
	for range racers {
		wg.Go(func() {
			_, err := u.Claim(t.Context(), c, "", time.Now())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, links.ErrUsed):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 || refused != racers-1 {
		t.Errorf("%d claims won and %d refused; want 1 and %d", won, refused, racers-1)
	}
	use, ok, err := u.Used(t.Context(), c.ID)
	if err != nil || !ok || use.Person != c.Person {
		t.Errorf("Used = %+v, %v, %v; want a use by %s", use, ok, err, c.Person)
	}
}

func TestAReleasedClaimLetsTheLinkBeUsedAgain(t *testing.T) {
	u := openUses(t)
	c := claims()
	c.ID = links.NewID()
	cl, err := u.Claim(t.Context(), c, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Release(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := u.Used(t.Context(), c.ID); ok {
		t.Error("a released link still reads as used")
	}
	if _, err := u.Claim(t.Context(), c, "", time.Now()); err != nil {
		t.Fatalf("claiming a released link: %v", err)
	}
	// A stale release (of the first claim) leaves the second alone.
	if err := u.Release(t.Context(), cl); err == nil {
		t.Error("a release of an older claim removed the newer one")
	}
	if _, err := u.Claim(t.Context(), c, "", time.Now()); !errors.Is(err, links.ErrUsed) {
		t.Errorf("claim after a stale release = %v, want ErrUsed", err)
	}
}

func TestAUseGoesWhenItsLinkHasExpired(t *testing.T) {
	u := openUses(t)
	c := claims()
	c.ID = links.NewID()
	now := time.Now()
	// A use is kept a minute past its link's expiry; claimed an hour
	// past it, it is kept the least JetStream allows, a second.
	c.Expires = now.Add(-time.Hour).Unix()
	if _, err := u.Claim(t.Context(), c, "", now); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the use of an expired link to go", func() bool {
		_, ok, err := u.Used(t.Context(), c.ID)
		return err == nil && !ok
	})
}

func TestALinkUsedWithAKeyIsClaimedAgainOnlyByARetryWithThatKey(t *testing.T) {
	u := openUses(t)
	c := claims()
	c.ID = links.NewID()
	first, err := u.Claim(t.Context(), c, "ticket-4821", time.Now())
	if err != nil || first.Retry {
		t.Fatalf("first claim = %+v, %v", first, err)
	}
	again, err := u.Claim(t.Context(), c, "ticket-4821", time.Now())
	if err != nil || !again.Retry || again.Revision != first.Revision {
		t.Errorf("claim with the same key = %+v, %v; want the first use (revision %d) as a retry", again, err, first.Revision)
	}
	for _, key := range []string{"ticket-9999", ""} {
		if _, err := u.Claim(t.Context(), c, key, time.Now()); !errors.Is(err, links.ErrUsed) {
			t.Errorf("claim with key %q: %v, want ErrUsed", key, err)
		}
	}
	use, _, err := u.Used(t.Context(), c.ID)
	if err != nil || use.KeyDigest == "" || use.KeyDigest == "ticket-4821" {
		t.Errorf("use = %+v, %v; want the key's digest, not the key", use, err)
	}
}
