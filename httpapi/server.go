package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Defaults of [Config], and the bounds of what a request may ask.
const (
	// DefaultAddr is where the API listens: loopback only.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultWait is how long a command waits for its outcome when the
	// request has no ?wait=.
	DefaultWait = 10 * time.Second
	// DefaultGateWait is how long a tool request waits for its decision
	// when the request has no ?wait=.
	DefaultGateWait = 30 * time.Second
	// MaxWait is the longest ?wait= a request may ask for.
	MaxWait = 5 * time.Minute
	// MaxBody is the largest request body, the protocol's largest message.
	MaxBody = events.MaxSize
	// DefaultBodyTimeout is how long a request's body may take to arrive.
	DefaultBodyTimeout = 30 * time.Second
)

// Timeouts of the HTTP server.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// ErrNoAuth: the API would listen beyond loopback without an auth file,
// where anyone who reaches it could decide approvals as [LocalCaller].
// [Config.Validate] and [New] refuse it.
var ErrNoAuth = errors.New("httpapi: refusing to listen beyond loopback without an auth file")

// Port is what the API needs of a running Interlock: a client of the wire
// protocol, and resumes sent on behalf of a caller it authenticated,
// vouched for with the deployment's secret (which stays with the port).
// *interlock.Service is one.
type Port interface {
	// Client returns a client of the wire protocol; source names its
	// events' sender.
	Client(source string) *client.Client
	// ClientAs returns a client that sends every command vouched for
	// caller, whom the API authenticated.
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	// Authority decides what a caller may do.
	Authority() *authority.Authority
}

// Config configures a [Server].
type Config struct {
	// Addr is the host:port the API listens on; port 0 picks a free one.
	// Without Auth it must be a loopback address. Defaults to DefaultAddr.
	Addr string
	// Auth authenticates callers by bearer token. Without it every caller
	// is LocalCaller, holding every role: the API then listens on
	// loopback only and answers only requests addressed to a loopback
	// host. Optional.
	Auth *AuthFile
	// People returns the directory of people callers authenticate
	// against, by their bearer token's hash; a people.Live's Current
	// follows the configuration bucket. While it returns nil (no
	// directory), Auth is used, and without Auth every caller is
	// LocalCaller on loopback only. An empty directory authenticates no
	// one. The roles of a decision link's or callback URL's person are
	// read from it when the link is used (from Auth for someone not in
	// it). Optional.
	People func() *people.Directory
	// Wait is how long a command waits for its outcome when the request
	// does not say. Defaults to DefaultWait.
	Wait time.Duration
	// GateWait is how long a tool request waits for its decision when the
	// request does not say. Defaults to DefaultGateWait.
	GateWait time.Duration
	// BodyTimeout bounds the time a request's body may take to arrive,
	// counted once its headers are read, on every path (an unauthenticated
	// request's included): a slower client's connection is closed.
	// Defaults to DefaultBodyTimeout.
	BodyTimeout time.Duration
	// PublicURL is the address people and other systems reach the API
	// at (https://interlock.example.com), which the links of mails and
	// callback URLs begin with: an absolute http or https URL with no
	// query, path or fragment. Beyond a loopback host it should be https
	// (the API logs a warning otherwise). Defaults to http:// and the
	// address the API listens on.
	PublicURL string
	// Links signs and checks callback URLs (the Service's Links); Uses
	// records them used (its LinkUses). Without both, the callback
	// routes answer 501 unsupported. Optional.
	Links *links.Signer
	Uses  *links.Uses
	// Logger for the API. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	c.GateWait = cmp.Or(c.GateWait, DefaultGateWait)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, DefaultBodyTimeout)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// Validate reports what is wrong with the configuration, its defaults
// filled in: New refuses the same. Check it before starting anything else.
func (c Config) Validate() error { return c.withDefaults().validate() }

// directory is the directory callers authenticate against now, or nil
// when there is none: every caller is then LocalCaller. A changed auth
// file is read again, and said in log (if not nil).
func (c Config) directory(log *zerolog.Logger) *people.Directory {
	if c.People != nil {
		if d := c.People(); d != nil {
			return d
		}
	}
	if c.Auth == nil {
		return nil
	}
	if log != nil {
		if changed, err := c.Auth.Refresh(); err != nil {
			log.Error().Err(err).Msg("auth file not read again; the callers read before stay")
		} else if changed {
			log.Info().Str("auth_file", c.Auth.Path()).Int("callers", c.Auth.Len()).Msg("auth file read again")
		}
	}
	return c.Auth.Directory()
}

func (c Config) validate() error {
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: Config.Addr %q: %w; use host:port such as %s", c.Addr, err, DefaultAddr)
	}
	if c.directory(nil) == nil && !netaddr.IsLoopbackHost(host) {
		return fmt.Errorf("%w: Config.Addr %q would let anyone who reaches it decide approvals as %q; set Config.People (interlock serve --people FILE, with people from `interlock people add`) or Config.Auth, or listen on 127.0.0.1", ErrNoAuth, c.Addr, LocalCaller)
	}
	if c.PublicURL != "" {
		if err := checkPublicURL(c.PublicURL); err != nil {
			return err
		}
	}
	switch {
	case c.Wait < 0 || c.Wait > MaxWait:
		return fmt.Errorf("httpapi: Config.Wait %s: use up to %s (0 for the default)", c.Wait, MaxWait)
	case c.GateWait < 0 || c.GateWait > MaxWait:
		return fmt.Errorf("httpapi: Config.GateWait %s: use up to %s (0 for the default)", c.GateWait, MaxWait)
	case c.BodyTimeout < 0:
		return fmt.Errorf("httpapi: Config.BodyTimeout %s: use a positive duration (0 for the default, %s)", c.BodyTimeout, DefaultBodyTimeout)
	}
	return nil
}

// Server is Interlock's HTTP API: the wire protocol's operations for
// inboxes and scripts, standing on a [Port]. It is a background service of
// an interlock.Service: Start returns once it listens, Stop shuts it down.
type Server struct {
	port    Port
	cfg     Config
	log     zerolog.Logger
	mux     *http.ServeMux
	handler http.Handler
	routes  []route
	// loopback is set when the API listens on loopback only: a caller
	// without a directory is the local user only there.
	loopback bool

	// streams ends the event streams when the server stops.
	streams    context.Context
	endStreams context.CancelFunc

	mu       sync.Mutex
	srv      *http.Server
	addr     net.Addr
	public   string
	served   chan struct{}
	serveErr error
	stopped  bool
	stopErr  error
}

// route is one operation of the API.
type route struct {
	method, path string
	handle       func(w http.ResponseWriter, r *http.Request, c Caller)
	// public routes need no caller.
	public bool
	// secretPath routes carry a credential in their path, which the log
	// leaves out.
	secretPath bool
}

// New returns a server of port's protocol operations.
func New(port Port, cfg Config) (*Server, error) {
	if port == nil {
		return nil, errors.New("httpapi: New needs a Port, such as the *interlock.Service")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(cfg.Addr) // validate checked it
	s := &Server{port: port, cfg: cfg, log: *cfg.Logger, mux: http.NewServeMux(), loopback: netaddr.IsLoopbackHost(host)}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.routes = []route{
		{method: "GET", path: "/v1/interrupts", handle: s.listInterrupts},
		{method: "GET", path: "/v1/runs", handle: s.listRuns},
		{method: "GET", path: "/v1/runs/{flow}/{run}", handle: s.getRun},
		{method: "POST", path: "/v1/runs/{flow}", handle: s.startRun},
		{method: "POST", path: "/v1/runs/{flow}/{run}/resume", handle: s.resumeRun},
		{method: "POST", path: "/v1/runs/{flow}/{run}/cancel", handle: s.cancelRun},
		{method: "POST", path: "/v1/runs/{flow}/{run}/assign", handle: s.assignRun},
		{method: "POST", path: "/v1/runs/{flow}/{run}/callbacks", handle: s.mintCallback},
		{method: "POST", path: "/v1/callbacks/{link}", handle: s.useCallback, public: true, secretPath: true},
		{method: "POST", path: "/v1/gate/requests", handle: s.requestTool},
		{method: "POST", path: "/v1/gate/requests/{callId}/consume", handle: s.consumeTool},
		{method: "GET", path: "/v1/audit/keys", handle: s.auditKeys, public: true},
		{method: "POST", path: "/v1/asks", handle: s.postAsk},
		{method: "GET", path: "/v1/asks/{askId}", handle: s.getAsk},
		{method: "GET", path: "/v1/events", handle: s.watchEvents},
		{method: "GET", path: "/v1/away", handle: s.getAway},
		{method: "PUT", path: "/v1/away", handle: s.putAway},
		{method: "DELETE", path: "/v1/away", handle: s.deleteAway},
		{method: "GET", path: "/v1/openapi.json", handle: serveOpenAPI, public: true},
	}
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.path, s.authenticated(rt))
	}
	protect := http.NewCrossOriginProtection()
	protect.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newProblem(CodeCrossOrigin, "a browser sent this request from another site; the API takes no cross-origin requests"))
	}))
	s.handler = s.common(protect.Handler(http.HandlerFunc(s.dispatch)))
	return s, nil
}

// Handle serves pattern (a net/http ServeMux pattern outside /v1/) with
// h on the API's port, behind the same checks as the API's routes: the
// loopback Host rule without an auth file, the cross-origin protection,
// Cache-Control: no-store and nosniff. h authenticates its own callers.
// The context of h's requests ends when the server stops, so that a
// stream h serves does not hold the shutdown. Call it before Start; the
// inbox mounts its pages with it.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// Handler is the API's handler, for a server of one's own or a test.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Config.Addr and serves in the background; it returns
// once the listener is open.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil || s.stopped {
		return errors.New("httpapi: Start called twice, or after Stop")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("httpapi: listening on %s: %w", s.cfg.Addr, err)
	}
	s.addr = ln.Addr()
	s.public = s.cfg.PublicURL
	if s.public == "" {
		s.public = "http://" + reachable(s.addr.String())
	}
	s.public = strings.TrimRight(s.public, "/")
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	s.srv.RegisterOnShutdown(s.endStreams)
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	if u, _ := url.Parse(s.public); u != nil && u.Scheme == "http" && !netaddr.IsLoopbackHost(u.Hostname()) {
		s.log.Warn().Str("public_url", s.public).Msg("the public URL is plain http beyond loopback: decision links and callback URLs, which are credentials, would cross the network in clear; serve it behind https and give --public-url https://...")
	}
	ev := s.log.Info().Str("http", "http://"+s.addr.String()).Str("public_url", s.public)
	switch d := s.cfg.directory(nil); {
	case d == nil && s.cfg.People != nil:
		ev.Msg("HTTP API without a directory of people yet: every caller is the local user \"local\" with every role, on loopback only, until one is put in the configuration bucket")
	case d == nil:
		ev.Msg("HTTP API without an auth file: every caller is the local user \"local\" with every role, on loopback only")
	case s.cfg.People != nil:
		ev.Str("directory", d.Name()).Int("people", d.Len()).Msg("HTTP API serving; callers authenticate with bearer tokens of the directory of people")
	default:
		ev.Str("auth_file", s.cfg.Auth.Path()).Int("callers", s.cfg.Auth.Len()).Msg("HTTP API serving; callers authenticate with bearer tokens")
	}
	return nil
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == nil {
		return ""
	}
	return s.addr.String()
}

// PublicURL is the address the links of mails and callback URLs begin
// with, once started: Config.PublicURL, or the address the API listens
// on.
func (s *Server) PublicURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.public
}

// checkPublicURL reports what is wrong with a public URL.
func checkPublicURL(v string) error {
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return fmt.Errorf("httpapi: Config.PublicURL %q: %w; use an absolute URL such as https://interlock.example.com", v, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("httpapi: Config.PublicURL %q is not an absolute http or https URL; use one such as https://interlock.example.com", v)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?") || strings.HasSuffix(v, "#"):
		return fmt.Errorf("httpapi: Config.PublicURL %q has a query or a fragment; give the scheme and host only, such as https://interlock.example.com", v)
	case strings.Trim(u.Path, "/") != "":
		return fmt.Errorf("httpapi: Config.PublicURL %q has a path; the API serves at the root of its host, so give the scheme and host only, such as https://interlock.example.com", v)
	case u.User != nil:
		return fmt.Errorf("httpapi: Config.PublicURL has credentials in it; give the scheme and host only, such as https://interlock.example.com")
	}
	return nil
}

// reachable is addr as a client reaches it: an unspecified address (the
// API listens on every interface) as loopback.
func reachable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// Stop ends the event streams, lets requests in flight finish until ctx
// ends (then closes their connections), and returns once the server is
// down. Stopping twice is safe; the second call returns what the first did.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.stopErr
	}
	s.stopped = true
	s.endStreams()
	if s.srv == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.served
	s.stopErr = errors.Join(err, s.serveErr)
	return s.stopErr
}

// common sets what every answer carries and, without an auth file, refuses
// requests addressed to a host other than loopback (a page on another
// site that resolves its own name to 127.0.0.1 cannot use the API).
//
// It also bounds the time the request's body may take to arrive
// (Config.BodyTimeout), whatever path answers the request: one that reads
// the body, or one that answers before (a 401), after which net/http reads
// what is left of the body before it answers. A body that has not arrived
// by then closes the connection.
func (s *Server) common(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) == nil {
				// Once the body is read, the connection may stay open as
				// long as the answer takes (an event stream).
				r.Body = &deadlineBody{ReadCloser: r.Body, read: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if s.cfg.directory(nil) == nil {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !netaddr.IsLoopbackHost(host) {
				writeProblem(w, newProblem(CodeCrossOrigin, fmt.Sprintf("this API has no auth file and answers only requests to a loopback host, not %q", r.Host)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// dispatch routes a request, answering a path no route has, or a method a
// route does not take, with problem details.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // it sets the path values
		return
	}
	// The mux's own answer, a 404 or a 405 with Allow, without its body.
	rec := &statusOnly{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.status == http.StatusMethodNotAllowed {
		writeProblem(w, newProblem(CodeMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, rec.header.Get("Allow"), r.Method)))
		return
	}
	writeProblem(w, newProblem(CodeNotFound, fmt.Sprintf("no route %s %s; GET /v1/openapi.json lists them", r.Method, r.URL.Path)))
}

// statusOnly records a status and headers, and drops the body.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(status int)      { s.status = status }

// authenticated runs a route for the caller its bearer token names.
func (s *Server) authenticated(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		c, ok := Caller{}, true
		if !rt.public {
			c, ok = s.caller(r)
		}
		if ok {
			rt.handle(sw, r, c)
		} else {
			// The body of a caller not known is not read: answer at
			// once, and close the connection rather than wait for it.
			sw.Header().Set("Connection", "close")
			writeProblem(sw, newProblem(CodeUnauthorized, "send Authorization: Bearer <token>, a token from `interlock people add --token`"))
		}
		lvl := zerolog.DebugLevel
		if sw.status >= 500 {
			lvl = zerolog.WarnLevel
		}
		path := r.URL.Path
		if rt.secretPath {
			path = rt.path // the path holds a credential
		}
		s.log.WithLevel(lvl).Str("method", r.Method).Str("route", rt.path).Str("path", path).
			Int("status", sw.status).Str("caller", c.Name).Dur("took", time.Since(start)).Msg("http request")
	})
}

// Authenticate says who sent r, as the API's routes authenticate their
// callers (a bearer token of the directory of people, or the local user
// on a loopback listener without one), and false for a request of no one
// known. A handler mounted with [Server.Handle] calls it.
func (s *Server) Authenticate(r *http.Request) (Caller, bool) { return s.caller(r) }

// caller authenticates a request.
func (s *Server) caller(r *http.Request) (Caller, bool) {
	d := s.cfg.directory(&s.log)
	if d == nil {
		// No directory: the local user, on a loopback listener only
		// (Validate and New check it; this holds if a directory is
		// ever taken away).
		return authority.Local(LocalCaller), s.loopback
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Caller{}, false
	}
	c, ok := Authenticate(d, strings.TrimSpace(token))
	if !ok {
		return c, false
	}
	// A delegate of people away holds what they delegated (one rule, the
	// authority's).
	return s.port.Authority().Widen(c), true
}

// deadlineBody is a request body that calls read once it has been read
// to its end.
type deadlineBody struct {
	io.ReadCloser
	read func()
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.read()
	}
	return n, err
}

// statusWriter remembers the status written, for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (to flush an
// event stream and set deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
