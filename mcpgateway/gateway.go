package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
)

// Implementation is how the gateway introduces itself, to MCP clients
// and to the upstreams.
var Implementation = mcp.Implementation{Name: "interlock-gateway", Title: "Interlock MCP gateway", Version: "v1"}

// SessionTimeout is how long a streamable HTTP session may stay idle
// before the gateway ends it.
const SessionTimeout = time.Hour

// Port is what the gateway needs of Interlock: a client of the wire
// protocol, and the deployment's authority. *interlock.Service is one,
// and so is a connection to a deployment.
type Port interface {
	// Client returns a client of the wire protocol; source names its
	// events' sender.
	Client(source string) *client.Client
	// Authority decides what the gateway's sender may read of a call.
	Authority() *authority.Authority
}

// Gateway is an MCP server that shows the tools of its upstream MCP
// servers and puts every call through Interlock's tool-call gate before
// it forwards it. Connect it to its upstreams with [Gateway.Start], then
// serve it over stdio with [Gateway.Run] or over streamable HTTP with
// [Gateway.Handler]; [Gateway.Close] ends it.
type Gateway struct {
	port Port
	cfg  Config
	mcp  *mcp.Server

	// done ends when the gateway closes; calls in flight end with it, and
	// calls tracks them.
	done  context.Context
	stop  context.CancelFunc
	calls sync.WaitGroup

	mu     sync.Mutex
	ups    []*upstream
	routes map[string]route // by the name the gateway shows
	closed bool
	// tasks are the runs of decided tasks' calls, by task id, kept for
	// the repeat window (the approval itself is taken in Interlock, once).
	tasks map[string]*taskRun
	// settling are the calls whose takes of their approval went
	// unanswered (an answer lost in a partition), by call id: each is
	// finished by a settler of the gateway's, which the same call made
	// again waits for.
	settling map[string]*settler
	// taken, when set (by tests), is called once a call's approval is
	// taken, before the call runs, with the context of its caller's
	// request.
	taken func(caller context.Context)
	log   zerolog.Logger
}

// upstream is a connected upstream and the tools it lists.
type upstream struct {
	cfg   Upstream
	cs    *mcp.ClientSession
	tools []*mcp.Tool
}

// route is where a tool the gateway shows comes from.
type route struct {
	up   *upstream
	tool *mcp.Tool
}

// New returns a gateway with cfg that asks port's gate. It connects to
// nothing until [Gateway.Start].
func New(port Port, cfg Config) (*Gateway, error) {
	if port == nil {
		return nil, errors.New("mcpgateway: New needs a Port, such as the *interlock.Service")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{port: port, cfg: cfg, routes: map[string]route{}, tasks: map[string]*taskRun{}, settling: map[string]*settler{}, log: *cfg.Logger}
	g.done, g.stop = context.WithCancel(context.Background())
	impl := Implementation
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	caps.AddExtension(TasksExtension, map[string]any{})
	g.mcp = mcp.NewServer(&impl, &mcp.ServerOptions{Instructions: instructions, Capabilities: caps})
	if err := g.serveTasks(); err != nil {
		return nil, fmt.Errorf("mcpgateway: serving tasks: %w", err)
	}
	return g, nil
}

// instructions tell the model what the gateway does to its calls.
const instructions = `Every tool call goes through Interlock's approval gate first. Most calls run at once. A call that needs
a person's approval waits for them; when its result says it awaits approval, it has not run: tell the user,
and call the same tool with the same arguments later to get the outcome. When a call is rejected, its result
gives the approver's reason: tell the user, and do not retry it unchanged.`

// Start connects to every upstream, lists their tools and shows them. It
// returns an error naming the upstream that cannot be reached or whose
// tools clash.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	if g.ups != nil || g.closed {
		g.mu.Unlock()
		return errors.New("mcpgateway: Start was already called")
	}
	g.ups = []*upstream{}
	g.mu.Unlock()
	for _, uc := range g.cfg.Upstreams {
		up := &upstream{cfg: uc}
		t, err := g.transport(uc)
		if err != nil {
			return errors.Join(err, g.Close())
		}
		c := mcp.NewClient(&Implementation, &mcp.ClientOptions{
			ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
				// The upstream's tools changed: show the new list. An
				// upstream that cannot list them keeps its old ones.
				_ = g.relist(ctx, up)
			},
		})
		cs, err := c.Connect(ctx, t, nil)
		if err != nil {
			return errors.Join(fmt.Errorf("mcpgateway: connecting to upstream %s (%s): %w", uc.Name, where(uc), err), g.Close())
		}
		up.cs = cs
		g.mu.Lock()
		g.ups = append(g.ups, up)
		g.mu.Unlock()
		if err := g.relist(ctx, up); err != nil {
			return errors.Join(err, g.Close())
		}
	}
	return nil
}

// where says where an upstream is, for errors.
func where(u Upstream) string {
	switch {
	case u.Transport != nil:
		return "in process"
	case u.URL != "":
		return u.URL
	}
	return "command " + u.Command
}

// transport is how to reach an upstream.
func (g *Gateway) transport(u Upstream) (mcp.Transport, error) {
	switch {
	case u.Transport != nil:
		return u.Transport, nil
	case u.URL != "":
		return &mcp.StreamableClientTransport{Endpoint: u.URL}, nil
	}
	path, err := exec.LookPath(u.Command)
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: upstream %s: command %q: %w; give the program's path, or put it on PATH", u.Name, u.Command, err)
	}
	cmd := exec.Command(path, u.Args...)
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(u.Env)) {
		cmd.Env = append(cmd.Env, k+"="+u.Env[k])
	}
	cmd.Stderr = orDiscard(g.cfg.Stderr)
	return &mcp.CommandTransport{Command: cmd}, nil
}

// orDiscard is w, or a writer that discards when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// relist reads up's tools and shows the gateway's new tool list.
func (g *Gateway) relist(ctx context.Context, up *upstream) error {
	var tools []*mcp.Tool
	for t, err := range up.cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcpgateway: listing the tools of upstream %s: %w", up.cfg.Name, err)
		}
		if err := checkSchema(t); err != nil {
			return fmt.Errorf("mcpgateway: upstream %s: tool %s: %w", up.cfg.Name, t.Name, err)
		}
		tools = append(tools, t)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	up.tools = tools
	routes, err := routesOf(g.ups)
	if err != nil {
		return err
	}
	var gone []string
	for name, old := range g.routes {
		r, ok := routes[name]
		if !ok {
			gone = append(gone, name)
		}
		if ok && (r.up.cfg.Name != old.up.cfg.Name || r.tool.Name != old.tool.Name) {
			g.log.Warn().Str("shown_as", name).Str("was", old.up.cfg.Name+"/"+old.tool.Name).Str("now", r.up.cfg.Name+"/"+r.tool.Name).
				Msg("mcp gateway: a tool name the model calls now reaches another upstream's tool; the gate sees each call as its upstream's tool")
		}
	}
	for name, r := range routes {
		for oldName, old := range g.routes {
			if oldName != name && old.up == r.up && old.tool.Name == r.tool.Name {
				g.log.Warn().Str("upstream", r.up.cfg.Name).Str("tool", r.tool.Name).Str("was_shown_as", oldName).Str("now_shown_as", name).
					Msg("mcp gateway: a tool is shown under another name (another upstream shows one of the same name); the rules that name it still hold it, as its upstream's tool")
			}
		}
	}
	g.mcp.RemoveTools(gone...)
	for _, name := range slices.Sorted(maps.Keys(routes)) {
		r := routes[name]
		shown := *r.tool
		shown.Name = name
		g.mcp.AddTool(&shown, g.handler(name))
	}
	g.routes = routes
	return nil
}

// checkSchema checks that a tool's input schema is a JSON object schema,
// as MCP requires.
func checkSchema(t *mcp.Tool) error {
	m, ok := t.InputSchema.(map[string]any)
	if !ok || m["type"] != "object" {
		return errors.New(`its input schema is not a JSON Schema of type "object", as MCP requires of a tool`)
	}
	return nil
}

// routesOf names the tools of ups as the gateway shows them.
func routesOf(ups []*upstream) (map[string]route, error) {
	count := map[string]int{}
	for _, up := range ups {
		for _, t := range up.tools {
			count[t.Name]++
		}
	}
	routes := map[string]route{}
	for _, up := range ups {
		for _, t := range up.tools {
			name := t.Name
			if up.cfg.Prefix == PrefixAlways || (up.cfg.Prefix == PrefixAuto && count[t.Name] > 1) {
				name = up.cfg.Name + Separator + t.Name
			}
			if prev, ok := routes[name]; ok {
				return nil, fmt.Errorf("mcpgateway: upstreams %s and %s both show a tool named %s: set prefix: auto or always on one of them", prev.up.cfg.Name, up.cfg.Name, name)
			}
			routes[name] = route{up: up, tool: t}
		}
	}
	return routes, nil
}

// routeOf finds the route of tool on upstream server, and the name the
// gateway shows it as.
func (g *Gateway) routeOf(server, tool string) (string, route, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, r := range g.routes {
		if r.up.cfg.Name == server && r.tool.Name == tool {
			return name, r, true
		}
	}
	return "", route{}, false
}

// Tools returns the names of the tools the gateway shows, sorted.
func (g *Gateway) Tools() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.routes))
}

// MCP is the gateway's MCP server, for a transport of one's own.
func (g *Gateway) MCP() *mcp.Server { return g.mcp }

// Run serves one session on t (such as &mcp.StdioTransport{}) until the
// client goes away or ctx ends.
func (g *Gateway) Run(ctx context.Context, t mcp.Transport) error {
	err := g.mcp.Run(ctx, t)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler serves the streamable HTTP transport. It refuses browsers'
// cross-origin requests.
func (g *Gateway) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.mcp }, &mcp.StreamableHTTPOptions{SessionTimeout: SessionTimeout})
	return http.NewCrossOriginProtection().Handler(h)
}

// Close ends the calls in flight, the gateway's sessions and its
// connections to the upstreams (stopping the commands it started). A call
// that waited for a decision is not lost: the same call made again, to
// another gateway, gets the decision. Closing twice is safe.
func (g *Gateway) Close() error {
	g.mu.Lock()
	ups := g.ups
	g.ups, g.closed = nil, true
	g.mu.Unlock()
	g.stop()
	g.calls.Wait()
	for ss := range g.mcp.Sessions() {
		_ = ss.Close()
	}
	var errs []error
	for _, up := range ups {
		if up.cs == nil {
			continue
		}
		if err := up.cs.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("mcpgateway: closing upstream %s: %w", up.cfg.Name, err))
		}
	}
	return errors.Join(errs...)
}
