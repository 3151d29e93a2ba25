package inbox

import (
	"net/http"

	"github.com/interlockhq/interlock/webpush"
)

// registerPush mounts what makes the inbox an installable web app taking
// Web Push: its manifest, its service worker (which shows the notices and
// answers their actions), and, for a person signed in, the subscription
// of the browser they are in to the approvals that wait on them.
func (in *Inbox) registerPush(m Mux) {
	m.Handle("GET /manifest.webmanifest", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/manifest+json")
		_, _ = w.Write([]byte(manifest))
	}))
	m.Handle("GET /sw.js", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := assetFS.ReadFile("assets/sw.js")
		if err != nil {
			http.Error(w, "no service worker", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		// A browser checks for a new worker on each navigation.
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}))
	m.Handle("POST /push", in.signedIn(in.subscribe))
	m.Handle("POST /push/forget", in.signedIn(in.unsubscribe))
}

// manifest is the web app's manifest.
const manifest = `{
  "name": "Interlock inbox",
  "short_name": "Interlock",
  "description": "Questions and approvals that wait on you",
  "start_url": "/",
  "scope": "/",
  "display": "standalone",
  "background_color": "#ffffff",
  "theme_color": "#1f4e8c",
  "icons": [{"src": "/assets/icon.svg", "sizes": "any", "type": "image/svg+xml", "purpose": "any"}]
}
`

// pushKey is the VAPID public key the page subscribes with, "" when the
// deployment sends no Web Push.
func (in *Inbox) pushKey() string {
	if in.cfg.Push == nil {
		return ""
	}
	if d := in.cfg.Push(); d != nil {
		return d.PublicKey()
	}
	return ""
}

// pushFor reads the form of a request to /push, and answers for one that
// cannot be taken (no Web Push, a form that did not arrive whole or
// without its token, a caller who is nobody of the directory); it returns
// the devices otherwise.
func (in *Inbox) pushFor(w http.ResponseWriter, r *http.Request, s session) (*webpush.Devices, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "The form did not arrive whole.", http.StatusBadRequest)
		return nil, false
	}
	var d *webpush.Devices
	if in.cfg.Push != nil {
		d = in.cfg.Push()
	}
	switch {
	case d == nil:
		http.Error(w, "This Interlock sends no Web Push: it was started without the channel.", http.StatusNotFound)
	case !in.checkCSRF(r, s):
		http.Error(w, "The request did not come from the inbox's page: load it again.", http.StatusForbidden)
	case !in.inDirectory(s.Name):
		http.Error(w, "Only a person of the directory gets notices: "+s.Name+" is not one.", http.StatusForbidden)
	default:
		return d, true
	}
	return nil, false
}

// subscribe answers POST /push: the form's subscription (a
// PushSubscription's JSON) becomes a device of the person signed in.
func (in *Inbox) subscribe(w http.ResponseWriter, r *http.Request, s session) {
	d, ok := in.pushFor(w, r, s)
	if !ok {
		return
	}
	sub, err := webpush.ParseSubscription([]byte(r.PostFormValue("subscription")))
	if err != nil {
		http.Error(w, "The browser's subscription was not taken: "+err.Error()+".", http.StatusBadRequest)
		return
	}
	if err := d.Subscribe(r.Context(), s.Name, sub); err != nil {
		in.log.Error().Err(err).Str("person", s.Name).Msg("inbox: keeping a device for Web Push")
		http.Error(w, "The device could not be kept; try again.", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unsubscribe answers POST /push/forget: the device of the form's
// endpoint is no longer the person's.
func (in *Inbox) unsubscribe(w http.ResponseWriter, r *http.Request, s session) {
	d, ok := in.pushFor(w, r, s)
	if !ok {
		return
	}
	if err := d.Unsubscribe(r.Context(), s.Name, r.PostFormValue("endpoint")); err != nil {
		in.log.Error().Err(err).Str("person", s.Name).Msg("inbox: forgetting a device for Web Push")
		http.Error(w, "The device could not be forgotten; try again.", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// inDirectory reports whether name is a person of the directory: the
// people a channel reaches.
func (in *Inbox) inDirectory(name string) bool {
	if in.cfg.People == nil {
		return false
	}
	_, ok := in.cfg.People().Person(name)
	return ok
}
