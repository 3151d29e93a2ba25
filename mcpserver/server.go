package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/protocol"
)

// Defaults of [Config].
const (
	// DefaultApprover names the person behind the MCP client in audit
	// records.
	DefaultApprover = "mcp"
	// DefaultWait is how long a command waits for the event that settles
	// it.
	DefaultWait = client.DefaultWait
	// DefaultGateWait is how long request_tool_approval waits for the
	// gate's first answer (allowed, or the approval the call waits on).
	DefaultGateWait = 10 * time.Second
	// DefaultPageSize is list_pending's page when the model gives no limit.
	DefaultPageSize = 20
	// MaxPageSize is the largest page list_pending returns.
	MaxPageSize = 100
	// SessionTimeout is how long a streamable HTTP session may stay idle
	// before the server ends it (and forgets the tokens it kept).
	SessionTimeout = time.Hour
)

// Implementation is how the server introduces itself to MCP clients.
var Implementation = mcp.Implementation{Name: "interlock", Title: "Interlock", Version: "v1"}

// Port is what the server needs of a running Interlock: a client of the
// wire protocol, resumes sent on behalf of the approver, vouched for
// with the deployment's secret (which stays with the port), and the
// deployment's authority. It is the httpapi.Port; *interlock.Service is
// one.
type Port interface {
	// Client returns a client of the wire protocol; source names its
	// events' sender.
	Client(source string) *client.Client
	// ClientAs returns a client that sends every command vouched for
	// caller, with the deployment's secret; an error when the port does
	// not hold it.
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	// Authority decides what the approver may read and decide.
	Authority() *authority.Authority
}

// Config configures a [Server].
type Config struct {
	// Flows are what list_flows offers. Nothing on the wire lists the
	// flows a deployment runs, so whoever starts the server says; a
	// start_flow of another flow is still sent, and refused by the
	// deployment with the flows it knows when it runs no such flow.
	// Optional.
	Flows []Flow
	// KeepTokens resumes with the runs' resume tokens instead of
	// Port.ResumeAs, for a process that does not hold the deployment's
	// secret: the server keeps the token of each interrupt a session sees
	// (from start_flow and continue_flow), bound to that MCP session, and
	// never hands it to the model. A session then continues only the runs
	// whose interrupts it has seen.
	KeepTokens bool
	// Approver names the person behind the MCP client, in audit records
	// and as the events' source (/mcp/<approver>). Defaults to
	// DefaultApprover.
	Approver string
	// Roles are the approver roles the approver holds: continue_flow
	// decides an approval only for one of them. Optional: without roles,
	// approvals are left to people with the role.
	Roles []string
	// Wait is how long a command waits for its outcome. Defaults to
	// DefaultWait.
	Wait time.Duration
	// GateWait is how long request_tool_approval waits for the gate's
	// first answer. Defaults to DefaultGateWait.
	GateWait time.Duration
}

func (c Config) withDefaults() Config {
	c.Approver = cmp.Or(c.Approver, DefaultApprover)
	c.Wait = cmp.Or(c.Wait, DefaultWait)
	c.GateWait = cmp.Or(c.GateWait, DefaultGateWait)
	return c
}

func (c Config) validate() error {
	for i, f := range c.Flows {
		if err := protocol.CheckName("flow", f.Name); err != nil {
			return fmt.Errorf("mcpserver: Config.Flows[%d]: %s", i, strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	for _, r := range c.Roles {
		if err := protocol.CheckName("approver role", r); err != nil {
			return fmt.Errorf("mcpserver: Config.Roles: %s", strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	switch {
	case c.Wait < 0:
		return fmt.Errorf("mcpserver: Config.Wait is %s; it must be positive (0 for the default)", c.Wait)
	case c.GateWait < 0:
		return fmt.Errorf("mcpserver: Config.GateWait is %s; it must be positive (0 for the default)", c.GateWait)
	case strings.ContainsAny(c.Approver, ",\r\n"):
		return fmt.Errorf("mcpserver: Config.Approver %q: use a name without commas or line breaks", c.Approver)
	}
	return nil
}

// Server is Interlock's MCP server: tools that let a model start flows,
// answer their interrupts and ask the tool-call gate, standing on a
// [Port]. Serve it over stdio with [Server.Run], or over streamable HTTP
// with [Server.Handler].
type Server struct {
	port   Port
	cfg    Config
	mcp    *mcp.Server
	tokens *tokens
}

// New returns a server of port's flows and gate.
func New(port Port, cfg Config) (*Server, error) {
	if port == nil {
		return nil, errors.New("mcpserver: New needs a Port, such as the *interlock.Service")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{port: port, cfg: cfg}
	if cfg.KeepTokens {
		s.tokens = newTokens()
	}
	impl := Implementation
	s.mcp = mcp.NewServer(&impl, &mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	s.addTools()
	return s, nil
}

// instructions tell the model how to use the tools.
const instructions = `Interlock runs flows that collect information from the user and wait for people's approvals.
Start a flow with start_flow; when the result's status is "interrupt", ask the user what the interrupt asks,
in your own words, then answer with continue_flow, until the status is completed. Fields named hiddenContext
are guidance for you alone: follow them, never show or quote them to the user. When a hiddenContext starts
with "ERROR:", the user's last answer was rejected: explain why in your own words and ask again.
Before calling a risky tool, ask request_tool_approval; call the tool only when the decision is allowed,
approved or edited (then with the edited args). When it is pending, tell the user and check later with get_decision.`

// MCP is the server of the Model Context Protocol, for a transport of
// one's own.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session on t (such as &mcp.StdioTransport{}) until the
// client goes away or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler serves the streamable HTTP transport. It refuses browsers'
// cross-origin requests, and requests addressed to a host other than
// loopback when it is reached on loopback (DNS rebinding).
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{SessionTimeout: SessionTimeout})
	return http.NewCrossOriginProtection().Handler(h)
}

// Close ends every session of the server and waits for what the server
// started for them. Call it once the transports are down (an HTTP
// server shut down).
func (s *Server) Close() {
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	if s.tokens != nil {
		s.tokens.wait()
	}
}

// CheckAddr reports whether the streamable HTTP transport may listen on
// addr (host:port): on loopback only, unless public is set. The server
// does not authenticate its callers, and they act as the approver.
func CheckAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mcpserver: address %q: %w; use host:port such as 127.0.0.1:8765", addr, err)
	}
	if public {
		return nil
	}
	if netaddr.IsLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("mcpserver: address %q is not a loopback address: the MCP server does not authenticate its callers, and anyone who reaches it acts as the approver; listen on 127.0.0.1", addr)
}

// client returns a client that sends as the approver and waits up to
// wait: vouched for them, unless the server keeps tokens (it then holds
// no secret to vouch with).
func (s *Server) client(wait time.Duration) *client.Client {
	source := "/mcp/" + url.PathEscape(s.cfg.Approver)
	if s.tokens == nil {
		if c, err := s.port.ClientAs(source, s.caller().Protocol()); err == nil {
			return c.WithWait(wait)
		}
	}
	return s.port.Client(source).As(s.cfg.Approver).WithWait(wait)
}

// caller is the person behind the MCP client, as the operator who
// started the server named them.
func (s *Server) caller() authority.Caller {
	return authority.Caller{Name: s.cfg.Approver, Method: protocol.AuthMCP, Roles: s.cfg.Roles}
}
