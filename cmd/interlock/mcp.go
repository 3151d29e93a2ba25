package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/mcpserver"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// stdin is what `interlock mcp` reads over stdio; tests replace it.
var stdin io.ReadCloser = os.Stdin

// mcpPath is where the streamable HTTP transport is served.
const mcpPath = "/mcp"

// mcpShutdown bounds the end of the streamable HTTP server.
const mcpShutdown = 5 * time.Second

// exampleFlows are the flows `interlock serve` runs, as list_flows offers
// them when no --flow is given: nothing on the wire lists a deployment's
// flows.
var exampleFlows = []mcpserver.Flow{
	{Name: "booking", Description: "Books a course: asks the person's email, name and phone, level, the driver's name and license, and the topics that interest them."},
	{Name: "refund", Description: "Refunds an order: give orderId, amount and currency at start; asks the last 4 digits of the card, and refunds over $500 wait for a supervisor's approval."},
}

// mcpCmd runs `interlock mcp`: the MCP server, over stdio or streamable
// HTTP, against a running deployment.
func mcpCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "gateway" {
		return mcpGatewayCmd(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("mcp", "mcp [--http 127.0.0.1:PORT] [--role ROLE ...] [--flow NAME=DESCRIPTION ...] [flags]", stderr)
	cf := &clientFlags{}
	fs.StringVar(&cf.url, "nats-url", "", "NATS server `url` of the deployment (default: $INTERLOCK_NATS_URL, else $NATS_URL, else the --context's, else "+wire.DefaultURL+")")
	fs.StringVar(&cf.creds, "creds", envOr("NATS_CREDS", ""), "NATS credentials `file` (default: $NATS_CREDS, else the --context's)")
	fs.StringVar(&cf.natsContext, "context", envOr("NATS_CONTEXT", ""), "natscli context `name` (~/.config/nats/context/NAME.json) or file giving url, creds, user, password and TLS files")
	fs.StringVar(&cf.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	httpAddr := fs.String("http", envOr("INTERLOCK_MCP_HTTP", ""), "serve the streamable HTTP transport on `host:port` (at "+mcpPath+") instead of stdio; loopback only, unless --http-insecure-public")
	public := fs.Bool("http-insecure-public", false, "let --http listen beyond loopback: the MCP server authenticates no one, and anyone who reaches it starts runs and decides approvals as --approver")
	secretFile := fs.String("secret-file", "", "`file` holding the deployment's resume-token secret (as given to serve; or set INTERLOCK_SECRET): resumes are then vouched for; without it the server keeps each interrupt's token itself, for the MCP session that saw it")
	approver := fs.String("approver", defaultMCPApprover(), "`name` of the person behind the MCP client, in audit records (default: $INTERLOCK_MCP_APPROVER, else $INTERLOCK_AS, else your login name)")
	var roles, flowArgs listFlag
	fs.Var(&roles, "role", "approver `role` the person behind the MCP client holds (repeat for more): continue_flow decides approvals for these roles only")
	fs.Var(&flowArgs, "flow", "`name[=description]` of a flow list_flows offers (repeat for more; default: the flows of interlock serve)")
	wait := fs.Duration("wait", mcpserver.DefaultWait, "how long a command waits for its outcome")
	gateWait := fs.Duration("gate-wait", mcpserver.DefaultGateWait, "how long request_tool_approval waits for the gate's first answer")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) > 0 {
		return usageOf("mcp", "mcp takes no arguments, but was given %s", quoteAll(pos))
	}
	if *httpAddr != "" {
		if err := mcpserver.CheckAddr(*httpAddr, *public); err != nil {
			return usageOf("mcp", "--http: %s, or add --http-insecure-public for a network you trust", strings.TrimPrefix(err.Error(), "mcpserver: "))
		}
	} else if *public {
		return usageOf("mcp", "--http-insecure-public goes with --http")
	}
	flows := exampleFlows
	if len(flowArgs) > 0 {
		flows = nil
		for _, f := range flowArgs {
			name, desc, _ := strings.Cut(f, "=")
			flows = append(flows, mcpserver.Flow{Name: name, Description: desc})
		}
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return usagef("%v", err)
	}
	names, err := wire.NewNames(cf.prefix)
	if err != nil {
		return usagef("--prefix: %v", err)
	}
	conn, err := cf.connConfig()
	if err != nil {
		return err
	}
	conn.Name = "interlock-mcp"
	cfg := mcpserver.Config{
		Flows: flows, KeepTokens: len(secret) == 0, Approver: *approver, Roles: roles,
		Wait: *wait, GateWait: *gateWait,
	}
	nc, js, err := wire.Connect(ctx, conn)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	defer nc.Close()
	srv, err := mcpserver.New(remotePort{base: client.New(nc, js, names, "", 0), nc: nc, js: js, names: names, secret: secret}, cfg)
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "mcpserver: "))
	}
	defer srv.Close()
	if *httpAddr == "" {
		return srv.Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: nopCloser{stdout}})
	}
	return serveMCPHTTP(ctx, "mcp", srv.Handler(), srv.Close, *httpAddr, stdout, func(at string) string {
		return "MCP server (streamable HTTP) on " + at + ". Press Ctrl-C to stop."
	})
}

// serveMCPHTTP serves the streamable HTTP transport of h on addr until
// ctx ends, then closes (what ends the sessions' open streams, so that
// the shutdown need not wait for them) and shuts the listener down. what
// names the server ("mcp", "mcp gateway") in errors, and banner says
// where it listens, given the address.
func serveMCPHTTP(ctx context.Context, what string, h http.Handler, closeFn func(), addr string, stdout io.Writer, banner func(addr string) string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listening on %s: %w", what, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpPath, h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintln(stdout, banner("http://"+ln.Addr().String()+mcpPath))
	select {
	case err := <-served:
		return fmt.Errorf("%s: serving: %w", what, err)
	case <-ctx.Done():
	}
	// End the sessions first, so that their open streams end and the
	// shutdown need not wait for them; then those that began meanwhile.
	closeFn()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpShutdown)
	defer cancel()
	if err := hs.Shutdown(stop); err != nil {
		_ = hs.Close()
	}
	closeFn()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: serving: %w", what, err)
	}
	return nil
}

// remotePort is the MCP server's port on a connection to a deployment:
// clients of the wire protocol, and resumes vouched for with the
// deployment's secret, when the command has it.
type remotePort struct {
	// base is the client every Client copies, so that they share one
	// subscription to the deployment's events.
	base   *client.Client
	nc     *nats.Conn
	js     jetstream.JetStream
	names  wire.Names
	secret []byte
}

func (p remotePort) Client(source string) *client.Client {
	return p.base.WithSource(source)
}

func (p remotePort) ClientAs(source string, caller protocol.Caller) (*client.Client, error) {
	if len(p.secret) == 0 {
		return nil, errors.New("mcp: vouching takes the deployment's secret: give --secret-file or INTERLOCK_SECRET")
	}
	return p.base.WithSource(source).Vouched(p.secret, caller)
}

// Authority is the authority of a deployment as a command connected to
// it over NATS knows it: nobody identified, for the command does not know
// the deployment's directory of people. Interlock decides every command
// the command sends with the deployment's own; what the command reads is
// what its NATS credentials let it read.
func (p remotePort) Authority() *authority.Authority { return authority.New(authority.Config{}) }

// nopCloser leaves stdout open when the MCP session ends.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

var _ mcpserver.Port = remotePort{}

// defaultMCPApprover names the person behind an MCP client as the
// command line names its user: $INTERLOCK_MCP_APPROVER, else
// $INTERLOCK_AS, else the login name, else mcpserver.DefaultApprover.
func defaultMCPApprover() string {
	return cmp.Or(os.Getenv("INTERLOCK_MCP_APPROVER"), os.Getenv("INTERLOCK_AS"), loginName(), mcpserver.DefaultApprover)
}
