package inbox_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/webpush"
)

// pushSite is an inbox with Web Push, and a directory of ann (with a
// token) and of nobody else.
type pushSite struct {
	t       *testing.T
	base    string
	token   string
	devices *webpush.Devices
}

func startPushSite(t *testing.T, push bool) *pushSite {
	t.Helper()
	token := people.NewToken()
	dir, err := people.New("test", []people.Person{{Name: "ann", Roles: []string{"supervisor"}, TokenSHA256: people.HashToken(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, People: people.NewLive(dir)})
	s := &pushSite{t: t, token: token}
	if push {
		if s.devices, err = webpush.OpenDevices(t.Context(), svc.JetStream(), svc.Names()); err != nil {
			t.Fatal(err)
		}
	}
	log := zerolog.Nop()
	directory := func() *people.Directory { return dir }
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Links: svc.Links(), Uses: svc.LinkUses(), People: directory, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(svc, inbox.Config{Links: svc.Links(), Uses: svc.LinkUses(), People: directory, Logger: &log,
		Push: func() *webpush.Devices { return s.devices }})
	if err != nil {
		t.Fatal(err)
	}
	in.Register(api)
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	s.base = "http://" + api.Addr()
	return s
}

// get fetches path, signed in with token ("" for nobody).
func (s *pushSite) get(path, token string) (*http.Response, string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodGet, s.base+path, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: inbox.CookieName, Value: token})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// post sends a form to path, signed in with token.
func (s *pushSite) post(path, token string, form url.Values) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: inbox.CookieName, Value: token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var pushButton = regexp.MustCompile(`id="push" hidden data-key="([^"]+)" data-csrf="([^"]+)"`)

// browserSubscription is a PushSubscription as a browser makes it.
const browserSubscription = `{"endpoint": "https://push.example.com/p/ann-phone", "expirationTime": null, "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}`

// TestAPersonSignedInSubscribesTheirBrowserToWebPush: the page offers a
// person of the directory the subscription of their browser, with the
// deployment's VAPID key; the subscription becomes their device, and the
// door is closed to a form from elsewhere, to a subscription that is no
// browser's, and to a caller who is nobody of the directory.
func TestAPersonSignedInSubscribesTheirBrowserToWebPush(t *testing.T) {
	t.Parallel()
	s := startPushSite(t, true)
	_, page := s.get("/", s.token)
	m := pushButton.FindStringSubmatch(page)
	if m == nil || m[1] != s.devices.PublicKey() {
		t.Fatalf("the queue offers no subscription with the VAPID key:\n%s", page)
	}
	csrf := m[2]
	if !strings.Contains(page, `<link rel="manifest" href="/manifest.webmanifest">`) {
		t.Error("the page names no web app manifest")
	}

	if code, body := s.post("/push", s.token, url.Values{"subscription": {browserSubscription}}); code != http.StatusForbidden {
		t.Errorf("a subscription without the page's token: %d %s, want 403", code, body)
	}
	if code, body := s.post("/push", s.token, url.Values{"csrf": {csrf}, "subscription": {`{"endpoint": "http://evil.example/"}`}}); code != http.StatusBadRequest || !strings.Contains(body, "https://") {
		t.Errorf("a subscription that is no browser's: %d %s, want 400 saying what is wrong", code, body)
	}
	if code, _ := s.post("/push", "not-a-token", url.Values{"csrf": {csrf}, "subscription": {browserSubscription}}); code != http.StatusUnauthorized {
		t.Errorf("a subscription signed out: %d, want 401", code)
	}
	if code, body := s.post("/push", s.token, url.Values{"csrf": {csrf}, "subscription": {browserSubscription}}); code != http.StatusNoContent {
		t.Fatalf("ann's subscription: %d %s", code, body)
	}
	keys, err := s.devices.Of(t.Context(), "ann")
	if err != nil || len(keys) != 1 {
		t.Fatalf("ann's devices: %v %v, want one", keys, err)
	}
	// The same browser subscribing again is one device.
	s.post("/push", s.token, url.Values{"csrf": {csrf}, "subscription": {browserSubscription}})
	if keys, _ := s.devices.Of(t.Context(), "ann"); len(keys) != 1 {
		t.Errorf("after subscribing twice ann has %d devices", len(keys))
	}
	if code, _ := s.post("/push/forget", s.token, url.Values{"csrf": {csrf}, "endpoint": {"https://push.example.com/p/ann-phone"}}); code != http.StatusNoContent {
		t.Errorf("forgetting: %d", code)
	}
	if keys, _ := s.devices.Of(t.Context(), "ann"); len(keys) != 0 {
		t.Errorf("after forgetting ann has %d devices", len(keys))
	}
}

// TestTheServiceWorkerAndManifestAreServed: the inbox is an installable
// web app whose service worker controls it from the root.
func TestTheServiceWorkerAndManifestAreServed(t *testing.T) {
	t.Parallel()
	s := startPushSite(t, true)
	res, body := s.get("/sw.js", "")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") ||
		!strings.Contains(body, `addEventListener("push"`) || !strings.Contains(body, `addEventListener("notificationclick"`) {
		t.Errorf("/sw.js: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	res, body = s.get("/manifest.webmanifest", "")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/manifest+json" || !strings.Contains(body, `"start_url": "/"`) {
		t.Errorf("/manifest.webmanifest: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	if res, _ := s.get("/assets/icon.svg", ""); res.StatusCode != http.StatusOK {
		t.Errorf("the manifest's icon: %d", res.StatusCode)
	}
}

// TestWithoutWebPushNothingIsOffered: an inbox whose deployment sends no
// Web Push offers no subscription and takes none.
func TestWithoutWebPushNothingIsOffered(t *testing.T) {
	t.Parallel()
	s := startPushSite(t, false)
	if _, page := s.get("/", s.token); strings.Contains(page, `id="push"`) {
		t.Error("the page offers a subscription without Web Push")
	}
	if code, _ := s.post("/push", s.token, url.Values{"subscription": {browserSubscription}}); code != http.StatusNotFound {
		t.Errorf("a subscription without Web Push: %d, want 404", code)
	}
}
