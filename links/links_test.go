package links_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/links"
)

var secret = []byte("links-test-secret-links-test-secret-0123")

func signer(t *testing.T, secret []byte) *links.Signer {
	t.Helper()
	s, err := links.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func claims() links.Claims {
	return links.Claims{Kind: links.KindDecide, Flow: "refund", Run: "r-1", RequestID: "rq_1", Person: "ann@example.com", Expires: now.Add(time.Hour).Unix()}
}

func TestCheckReturnsTheClaimsSigned(t *testing.T) {
	s := signer(t, secret)
	text, err := s.Sign(claims())
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Check(text, links.KindDecide, now)
	if err != nil {
		t.Fatalf("Check = %v", err)
	}
	want := claims()
	want.ID = c.ID
	if c != want || c.ID == "" {
		t.Errorf("Check = %+v, want %+v with an id", c, want)
	}
	again, _ := s.Sign(claims())
	if again == text {
		t.Error("two links of the same claims are the same text; each needs an id of its own")
	}
}

func TestCheckRefusesForgedLinks(t *testing.T) {
	s := signer(t, secret)
	text, _ := s.Sign(claims())
	payload, sig, _ := strings.Cut(text, ".")
	body, _ := base64.RawURLEncoding.DecodeString(payload)
	altered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(body), `"r-1"`, `"r-2"`, 1)))
	sigBytes, _ := base64.RawURLEncoding.DecodeString(sig)
	sigBytes[0] ^= 1
	other, _ := signer(t, []byte("another-secret-another-secret-another-0123")).Sign(claims())
	callback := claims()
	callback.Kind = links.KindCallback
	asCallback, _ := s.Sign(callback)
	for name, text := range map[string]string{
		"altered payload":   altered + "." + sig,
		"altered signature": payload + "." + base64.RawURLEncoding.EncodeToString(sigBytes),
		"no signature":      payload,
		"empty":             "",
		"other secret":      other,
		"other kind":        asCallback,
		"too long":          payload + strings.Repeat("A", 5000) + "." + sig,
		"not base64":        "!!!." + sig,
	} {
		if _, err := s.Check(text, links.KindDecide, now); !errors.Is(err, links.ErrForged) {
			t.Errorf("%s: Check = %v, want ErrForged", name, err)
		}
	}
}

func TestCheckRefusesAnExpiredLink(t *testing.T) {
	s := signer(t, secret)
	text, _ := s.Sign(claims())
	if _, err := s.Check(text, links.KindDecide, now.Add(time.Hour-time.Second)); err != nil {
		t.Errorf("a second before expiry: %v", err)
	}
	c, err := s.Check(text, links.KindDecide, now.Add(time.Hour))
	if !errors.Is(err, links.ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	if !c.ExpiresAt().Equal(now.Add(time.Hour)) {
		t.Errorf("an expired link's claims say it expired at %v, want %v", c.ExpiresAt(), now.Add(time.Hour))
	}
}

func TestSignAndNewSignerRefuseWhatCannotWork(t *testing.T) {
	if _, err := links.NewSigner([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short secret: %v", err)
	}
	s := signer(t, secret)
	for name, c := range map[string]links.Claims{
		"no kind":   {Flow: "f", Run: "r", RequestID: "q", Person: "p", Expires: 1},
		"no person": {Kind: links.KindDecide, Flow: "f", Run: "r", RequestID: "q", Expires: 1},
		"no expiry": {Kind: links.KindDecide, Flow: "f", Run: "r", RequestID: "q", Person: "p"},
	} {
		if _, err := s.Sign(c); err == nil {
			t.Errorf("%s: Sign made a link", name)
		}
	}
}

func TestMintCallbackExpiresWithTheRequestOrAfterTheDefault(t *testing.T) {
	s := signer(t, secret)
	deadline := now.Add(90 * time.Minute).Add(300 * time.Millisecond)
	cb, err := s.MintCallback("https://interlock.example.com/", "refund", "r-1", "rq_1", "ops", deadline, now)
	if err != nil {
		t.Fatal(err)
	}
	text, ok := strings.CutPrefix(cb.URL, "https://interlock.example.com"+links.CallbackPath)
	if !ok {
		t.Fatalf("URL %s is not under the base's %s", cb.URL, links.CallbackPath)
	}
	c, err := s.Check(text, links.KindCallback, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Person != "ops" || c.RequestID != "rq_1" || c.Flow != "refund" || c.Run != "r-1" {
		t.Errorf("claims %+v", c)
	}
	if cb.ExpiresAt.Before(deadline) || cb.ExpiresAt.After(deadline.Add(time.Second)) {
		t.Errorf("expires %v, want the request's deadline %v rounded up to the second", cb.ExpiresAt, deadline)
	}
	open, err := s.MintCallback("http://127.0.0.1:8080", "refund", "r-1", "rq_1", "ops", time.Time{}, now)
	if err != nil || !open.ExpiresAt.Equal(now.Add(links.DefaultCallbackTTL)) {
		t.Errorf("without a deadline: %v, %v; want %v", open.ExpiresAt, err, now.Add(links.DefaultCallbackTTL))
	}
	if _, err := s.MintCallback("https://x.example", "refund", "r-1", "rq_1", "ops", now.Add(-time.Second), now); err == nil {
		t.Error("minted a callback URL for a request already expired")
	}
	if _, err := s.MintCallback("interlock.example.com", "refund", "r-1", "rq_1", "ops", deadline, now); err == nil {
		t.Error("minted a callback URL under a base that is not an absolute URL")
	}
}
