package a2aserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

const (
	// Path is where the A2A endpoint (JSON-RPC over HTTP, and its
	// streaming form) is served.
	Path = "/a2a"
	// CardPath is where the Agent Card is served, as A2A clients look
	// for it.
	CardPath = a2asrv.WellKnownAgentCardPath
	// ProtocolVersion is the version of A2A served.
	ProtocolVersion = "0.3.0"
	// DefaultWait is how long a blocking message/send waits for a
	// person's answer before it returns the task as it stands (working):
	// people answer in minutes or days, so a client reads the task again
	// (tasks/get), or follows it (message/stream, tasks/resubscribe).
	DefaultWait = 30 * time.Second
	// maxBody bounds a request's body.
	maxBody = 1 << 20
	// streamWait is how long one wait of a stream lasts before the next.
	streamWait = 25 * time.Second
)

// Port is what the server needs of Interlock: the *interlock.Service
// provides it.
type Port interface {
	// ClientAs returns a client that sends every command vouched for
	// caller, whom the API authenticated.
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	// Authority decides what a caller may do.
	Authority() *authority.Authority
	// JetStream and Names are where the push-notification
	// configurations are kept and the settled asks followed.
	JetStream() jetstream.JetStream
	Names() wire.Names
	// Egress is the deployment's outbound policy, which push
	// notifications obey.
	Egress() egress.Policy
}

// Mux is where the server mounts its two paths: the HTTP API's server
// (*httpapi.Server) is one, and authenticates its callers.
type Mux interface {
	Handle(pattern string, h http.Handler)
	Authenticate(r *http.Request) (authority.Caller, bool)
}

// Config configures a [Server].
type Config struct {
	// PublicURL returns the base URL the API is reached at; the Agent
	// Card's url is it followed by [Path]. Required.
	PublicURL func() string
	// Wait bounds how long a blocking message/send waits for the
	// answer. Defaults to DefaultWait.
	Wait time.Duration
	// Egress says where push notifications may connect (see package
	// egress). The zero Policy takes the port's, whose default refuses
	// loopback, private and link-local addresses unless allowed.
	Egress egress.Policy
	// Logger logs what goes wrong. Optional.
	Logger *zerolog.Logger
}

// Server is Interlock's A2A agent. It is a Background of the service
// (interlock.Service.Attach): started, it sends the push notifications.
type Server struct {
	port   Port
	cfg    Config
	log    zerolog.Logger
	egress egress.Policy
	// push POSTs the push notifications, through the outbound policy.
	push *http.Client

	mu       sync.Mutex
	pushes   jetstream.KeyValue
	sent     *notify.Sent
	follower *notify.Follower
}

// New returns the A2A agent of port.
func New(port Port, cfg Config) (*Server, error) {
	if port == nil {
		return nil, errors.New("a2aserver: New needs a Port, such as the *interlock.Service")
	}
	if cfg.PublicURL == nil {
		return nil, errors.New("a2aserver: Config.PublicURL is required: the Agent Card names the URL clients reach the agent at")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	s := &Server{port: port, cfg: cfg, log: zerolog.Nop(), egress: cfg.Egress}
	if cfg.Logger != nil {
		s.log = *cfg.Logger
	}
	if s.egress.IsZero() {
		s.egress = port.Egress()
	}
	if err := s.egress.Validate(); err != nil {
		return nil, fmt.Errorf("a2aserver: Config.Egress: %w", err)
	}
	s.push = &http.Client{Transport: s.egress.Transport(), Timeout: pushTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return s, nil
}

// Register mounts the Agent Card (GET [CardPath], public, as discovery
// documents are) and the A2A endpoint (POST [Path], for authenticated
// callers) on m.
func (s *Server) Register(m Mux) {
	m.Handle("GET "+CardPath, http.HandlerFunc(s.serveCard))
	rpc := a2asrv.NewJSONRPCHandler(handler{s})
	m.Handle("POST "+Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := m.Authenticate(r)
		if !ok {
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="interlock"`)
			writeError(w, http.StatusUnauthorized, -32600, "unauthorized",
				"send Authorization: Bearer <token>, a token of the directory of people (`interlock people add --token`), as the Agent Card's securitySchemes say")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, -32600, "invalid request", fmt.Sprintf("Content-Type is %q; A2A's JSON-RPC takes application/json", ct))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, -32600, "invalid request", fmt.Sprintf("the body could not be read whole (at most %d bytes): %v", maxBody, err))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		if s.deleted(w, r, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rpc.ServeHTTP(w, r)
	}))
}

// deleted answers tasks/pushNotificationConfig/delete, whose result is
// null: the SDK's handler writes no response at all for it, which its
// own client takes for a broken one.
func (s *Server) deleted(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var req struct {
		JSONRPC string                          `json:"jsonrpc"`
		ID      any                             `json:"id"`
		Method  string                          `json:"method"`
		Params  *a2a.DeleteTaskPushConfigParams `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || req.Method != "tasks/pushNotificationConfig/delete" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	res := map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": nil}
	if err := (handler{s}).OnDeleteTaskPushConfig(r.Context(), req.Params); err != nil {
		code, message := -32602, "invalid params"
		switch {
		case errors.Is(err, a2a.ErrTaskNotFound):
			code, message = -32001, "task not found"
		case errors.Is(err, a2a.ErrInternalError):
			code, message = -32603, "internal error"
		}
		delete(res, "result")
		res["error"] = map[string]any{"code": code, "message": message, "data": map[string]string{"error": err.Error()}}
	}
	_ = json.NewEncoder(w).Encode(res)
	return true
}

// writeError answers a request the JSON-RPC handler never sees.
func writeError(w http.ResponseWriter, status, code int, message, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": message, "data": map[string]string{"error": detail}}})
	_, _ = w.Write(append(b, '\n'))
}

// Card is the Agent Card: Interlock's skills (a question, a choice, an
// approval, each put to people), the JSON-RPC endpoint, streaming, and
// the bearer scheme callers authenticate with.
func (s *Server) Card() *a2a.AgentCard {
	modes := []string{"text/plain", "application/json"}
	return &a2a.AgentCard{
		Name:        "Interlock",
		Description: "Puts a question, a choice, or an approval of a tool call in front of the people who may answer it, durably (hours or days later, on any machine), and answers with their decision and its signed receipt.",
		URL:         strings.TrimSuffix(s.cfg.PublicURL(), "/") + Path,
		Version:     ProtocolVersion,
		// A2A's protocol version, which the SDKs compare.
		ProtocolVersion:    ProtocolVersion,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  modes,
		DefaultOutputModes: []string{"application/json", "text/plain"},
		SecuritySchemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a token of Interlock's directory of people (interlock people add --token); without a directory, on a loopback listener, none is needed"}},
		Security: []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		Skills:   skills(modes),
	}
}

func (s *Server) serveCard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Card())
}

// callerKey keys the authenticated caller in a request's context.
type callerKey struct{}

func callerOf(ctx context.Context) (authority.Caller, error) {
	c, ok := ctx.Value(callerKey{}).(authority.Caller)
	if !ok {
		return c, fmt.Errorf("%w: no authenticated caller", a2a.ErrInternalError)
	}
	return c, nil
}

// client returns a client vouched for c.
func (s *Server) client(c authority.Caller, wait time.Duration) (*client.Client, error) {
	cl, err := s.port.ClientAs("/a2a/"+c.Name, c.Protocol())
	if err != nil {
		s.log.Error().Err(err).Msg("vouching for an A2A caller")
		return nil, fmt.Errorf("%w: this server cannot vouch for its callers (its log says why); it needs the deployment's secret", a2a.ErrInternalError)
	}
	return cl.WithWait(wait), nil
}
