package inbox

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webpush"
)

// Defaults of [Config].
const (
	// DefaultWait is how long a form's answer or decision waits for its
	// outcome before the page says it is queued.
	DefaultWait = 10 * time.Second
)

// CookieName is the cookie that holds a signed-in caller's bearer token.
const CookieName = "interlock_token"

// maxForm bounds a form's body.
const maxForm = 1 << 20

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config configures an [Inbox].
type Config struct {
	// Auth authenticates callers by the bearer token they sign in with.
	// Without it every caller is httpapi.LocalCaller, holding every role,
	// and nobody signs in (the API it is mounted on is then on loopback
	// only). Optional; give the API's own.
	Auth *httpapi.AuthFile
	// People returns the directory of people callers sign in against, by
	// their bearer token; while it returns nil (no directory), Auth is
	// used. A decision link's person is looked up in it when the link is
	// opened, for the roles they hold then. Optional; give the API's own.
	People func() *people.Directory
	// Wait is how long an answer or a decision waits for its outcome.
	// Defaults to DefaultWait.
	Wait time.Duration
	// Links checks the decision links of mails (the Service's Links);
	// Uses records them used (its LinkUses). Without both, a decision
	// link's page says the deployment takes none. Optional.
	Links *links.Signer
	Uses  *links.Uses
	// Push returns the devices of the Web Push channel (its Devices), nil
	// while it has none: a person signed in may then subscribe the
	// browser they are in. Optional.
	Push func() *webpush.Devices
	// Logger for the inbox. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// Port is what the inbox stands on: the HTTP API's [httpapi.Port], and
// claiming, releasing and delegating approvals for a caller it
// authenticated. The *interlock.Service is one.
type Port interface {
	httpapi.Port
}

// Inbox is the web inbox: pages for people to answer questions and
// decide approvals, standing on a [Port].
type Inbox struct {
	port  Port
	cfg   Config
	log   zerolog.Logger
	pages map[string]*template.Template
	// csrfKey signs the forms' CSRF tokens when the inbox has no Links
	// (then it lives as long as the process, so a restart asks open
	// pages to be loaded again); with Links, the tokens are signed with
	// the deployment's links key, so that every process of a deployment
	// behind one address takes the forms of every other.
	csrfKey []byte
}

// Mux is where the inbox mounts its pages: an *httpapi.Server, or a
// *http.ServeMux.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// New returns an inbox on port.
func New(port Port, cfg Config) (*Inbox, error) {
	if port == nil {
		return nil, errors.New("inbox: New needs a Port, such as the *interlock.Service")
	}
	cfg = cfg.withDefaults()
	in := &Inbox{port: port, cfg: cfg, log: *cfg.Logger}
	in.csrfKey = make([]byte, 32)
	_, _ = rand.Read(in.csrfKey)
	var err error
	if in.pages, err = pages(newMarkdown()); err != nil {
		return nil, err
	}
	return in, nil
}

// pages parses the inbox's pages, each with the layout and the kinds'
// parts.
func pages(md *markdown) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, page := range []string{"queue", "done", "run", "login", "error", "decide", "decided", "bulk", "team", "away"} {
		t := template.New(page)
		t, err := t.Funcs(funcs).Funcs(template.FuncMap{"kind": kindPart(t), "markdown": md.render}).
			ParseFS(templateFS, "templates/layout.html", "templates/kinds.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		out[page] = t
	}
	return out, nil
}

// Register mounts the inbox's pages on m: the queue at /, the runs that
// finished at /done, a run at /runs/{flow}/{run} (its forms post there,
// and claims, releases and delegations to /runs/{flow}/{run}/assign),
// several decided at once at /bulk, the team's decision times at /team,
// signing in at /login, the page of a mailed decision link at
// /decide/{link} (it needs no sign-in: the link is the credential),
// the live stream at /stream, the assets under /assets/, and what makes
// it an installable web app taking Web Push: /manifest.webmanifest, the
// service worker /sw.js, and the subscription of a signed-in person's
// browser at /push (forgotten at /push/forget).
func (in *Inbox) Register(m Mux) {
	assets, _ := fs.Sub(assetFS, "assets")
	m.Handle("GET /{$}", in.signedIn(in.queue))
	m.Handle("GET /done", in.signedIn(in.done))
	m.Handle("GET /runs/{flow}/{run}", in.signedIn(in.runPage))
	m.Handle("POST /runs/{flow}/{run}", in.signedIn(in.resume))
	m.Handle("POST /runs/{flow}/{run}/assign", in.signedIn(in.assign))
	m.Handle("POST /bulk", in.signedIn(in.bulk))
	m.Handle("GET /team", in.signedIn(in.team))
	m.Handle("GET /away", in.signedIn(in.awayPage))
	m.Handle("POST /away", in.signedIn(in.awayPost))
	m.Handle("GET /stream", in.signedIn(in.stream))
	m.Handle("GET /login", http.HandlerFunc(in.loginPage))
	m.Handle("POST /login", http.HandlerFunc(in.login))
	m.Handle("POST /logout", in.signedIn(in.logout))
	m.Handle("GET "+links.DecidePath+"{link}", http.HandlerFunc(in.decidePage))
	m.Handle("POST "+links.DecidePath+"{link}", http.HandlerFunc(in.decide))
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	in.registerPush(m)
}

// session is a signed-in caller and the token it signed in with.
type session struct {
	httpapi.Caller
	token string
}

// holds reports whether the caller may decide an approval for role.
func (s session) holds(role string) bool {
	return s.AllRoles || slices.Contains(s.Roles, role)
}

// holdsAny reports whether the caller holds the approval's role or one
// of its quorum's roles.
func (s session) holdsAny(role string, q *protocol.Quorum) bool {
	if role != "" && s.holds(role) {
		return true
	}
	if q != nil {
		for _, rc := range q.Roles {
			if s.holds(rc.Role) {
				return true
			}
		}
	}
	return false
}

// mayDecide reports whether the caller may decide, claim or delegate
// run's approval, as the authority says, to show the forms; the engine
// asks it again.
func (in *Inbox) mayDecide(s session, run authority.Run) bool {
	return in.port.Authority().MayDecide(s.Caller, run, "") == nil
}

// decisions sets the decisions iv's forms offer the caller on run: each
// that the interrupt allows and the authority lets them send, with the
// authority's word on one it refuses.
func (in *Inbox) decisions(s session, run authority.Run, iv *interruptView) {
	iv.May, iv.VoteRefused = nil, ""
	for _, v := range iv.Allowed {
		err := in.port.Authority().MayDecide(s.Caller, run, v)
		var ref *authority.Refusal
		switch {
		case err == nil:
			iv.May = append(iv.May, v)
		case errors.As(err, &ref) && iv.VoteRefused == "":
			iv.VoteRefused = ref.Tell()
		}
	}
}

// caller authenticates a request by its cookie.
func (in *Inbox) caller(r *http.Request) (session, bool) {
	d := in.directory(true)
	if d == nil {
		return session{Caller: authority.Local(httpapi.LocalCaller), token: httpapi.LocalCaller}, true
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return session{}, false
	}
	c, ok := httpapi.Authenticate(d, ck.Value)
	c.Method = protocol.AuthSession
	if ok {
		// A delegate of people away holds what they delegated.
		c = in.port.Authority().Widen(c)
	}
	return session{Caller: c, token: ck.Value}, ok
}

// directory is the directory callers sign in against now, or nil when
// there is none: every caller is then the local user. With refresh, a
// changed auth file is read again.
func (in *Inbox) directory(refresh bool) *people.Directory {
	if in.cfg.People != nil {
		if d := in.cfg.People(); d != nil {
			return d
		}
	}
	if in.cfg.Auth == nil {
		return nil
	}
	if refresh {
		if _, err := in.cfg.Auth.Refresh(); err != nil {
			in.log.Error().Err(err).Msg("auth file not read again; the callers read before stay")
		}
	}
	return in.cfg.Auth.Directory()
}

// signedIn runs h for the request's caller, or sends the browser to sign
// in.
func (in *Inbox) signedIn(h func(http.ResponseWriter, *http.Request, session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := in.caller(r)
		if !ok {
			if r.Method == http.MethodGet && r.URL.Path != "/stream" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			in.errorPage(w, r, session{}, http.StatusUnauthorized, "You are signed out", "Sign in again with your token, then send the form again.")
			return
		}
		h(w, r, s)
	})
}

// csrf is the session's CSRF token: an HMAC of its bearer token, so it
// needs no server state and changes with the token.
func (in *Inbox) csrf(s session) string {
	if in.cfg.Links != nil {
		// Link ids are base64url, so no link's form token is a
		// session's.
		return in.cfg.Links.FormToken("csrf\x00" + s.token)
	}
	m := hmac.New(sha256.New, in.csrfKey)
	m.Write([]byte("csrf\x00" + s.token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// checkCSRF reports whether a form carries the session's CSRF token.
func (in *Inbox) checkCSRF(r *http.Request, s session) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(in.csrf(s))) == 1
}

// loginView is the data of the sign-in page.
type loginView struct {
	Next  string
	Error string
}

func (in *Inbox) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := in.caller(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	in.render(w, http.StatusOK, "login", page{Title: "Sign in", Body: loginView{Next: safeNext(r.URL.Query().Get("next"))}})
}

func (in *Inbox) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	next := safeNext(r.PostFormValue("next"))
	d := in.directory(false)
	if d == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if _, ok := httpapi.Authenticate(d, token); !ok {
		msg := "No caller holds this token. Ask the operator for one (interlock people add --token)."
		if token == "" {
			msg = "Enter your token."
		}
		in.render(w, http.StatusUnauthorized, "login", page{Title: "Sign in", Body: loginView{Next: next, Error: msg}})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: token, Path: "/",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (in *Inbox) logout(w http.ResponseWriter, r *http.Request, s session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !in.checkCSRF(r, s) {
		in.errorPage(w, r, s, http.StatusForbidden, "The form has expired", "Load the page again and send the form from there.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext is where to go after signing in: a path of this site, never
// another site's address.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

// client returns a client that sends every command vouched for the
// caller.
func (in *Inbox) client(s session) *client.Client {
	source := "/inbox/" + url.PathEscape(s.Name)
	c, err := in.port.ClientAs(source, s.Protocol())
	if err != nil {
		// Unvouched, its commands are refused where they need the
		// caller: say why once here.
		in.log.Error().Err(err).Msg("inbox: vouching for a caller")
		return in.port.Client(source).As(s.Name).WithWait(in.cfg.Wait)
	}
	return c.WithWait(in.cfg.Wait)
}

// page is what the layout renders.
type page struct {
	Title string
	// Nav names the view the page is, in the header's links: "queue" or
	// "done".
	Nav     string
	Session *session
	CSRF    string
	Body    any
	// PushKey is the VAPID public key a signed-in person subscribes their
	// browser with, "" without Web Push.
	PushKey string
	// Team is set when the person may read the team page; Away when
	// they are a person of the directory, who may name a delegate.
	Team, Away bool
}

func (in *Inbox) render(w http.ResponseWriter, status int, name string, p page) {
	if p.Session != nil {
		p.Team = in.port.Authority().MayReadAll(p.Session.Caller) == nil
		if d := in.directory(false); d != nil && in.awaySet() != nil {
			_, p.Away = d.Person(p.Session.Name)
		}
	}
	if p.Session != nil && in.inDirectory(p.Session.Name) {
		p.PushKey = in.pushKey()
	}
	in.renderTemplate(w, status, name, "layout", p)
}

func (in *Inbox) renderTemplate(w http.ResponseWriter, status int, name, tmpl string, data any) {
	var b strings.Builder
	if err := in.pages[name].ExecuteTemplate(&b, tmpl, data); err != nil {
		in.log.Error().Err(err).Str("page", name).Msg("inbox: rendering a page")
		http.Error(w, "The inbox failed to render this page; the server's log says why.", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	if h.Get("Referrer-Policy") == "" {
		h.Set("Referrer-Policy", "same-origin")
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// errorView is the data of the error page.
type errorView struct {
	Heading, Detail string
}

func (in *Inbox) errorPage(w http.ResponseWriter, _ *http.Request, s session, status int, heading, detail string) {
	p := page{Title: heading, Body: errorView{Heading: heading, Detail: detail}}
	if s.Name != "" {
		p.Session, p.CSRF = &s, in.csrf(s)
	}
	in.render(w, status, "error", p)
}
