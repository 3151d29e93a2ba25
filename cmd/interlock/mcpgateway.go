package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/interlockhq/interlock/client"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/mcpserver"
	"github.com/interlockhq/interlock/wire"
)

// mcpGatewayAbout is `interlock help mcp gateway`'s description.
const mcpGatewayAbout = `mcp gateway is an MCP server in front of other MCP servers (each a command on
stdio or a streamable HTTP URL, listed in --config): it shows their tools and puts
every tools/call through the tool-call gate of a running deployment (interlock
serve --gate-rules FILE). An allowed call is forwarded at once; a call a rule stops
waits up to --wait for a person, then returns the tool's real result (with the
approver's edited args), the approver's reason as an error, or an error saying it
awaits approval with its callId. The same call made again gets the decision
instead of asking twice. A client that takes MCP task handles (the extension
io.modelcontextprotocol/tasks) gets a task to poll at once instead of waiting.
See docs/mcp-gateway.md.
`

// mcpGatewayEnv lists the environment variables `mcp gateway` reads.
const mcpGatewayEnv = `  INTERLOCK_MCP_GATEWAY_CONFIG  default of --config
  INTERLOCK_NATS_URL  NATS server URL when --nats-url is not given
  NATS_URL            NATS server URL when neither --nats-url nor INTERLOCK_NATS_URL is set
  NATS_CREDS          default of --creds
  NATS_CONTEXT        default of --context
  XDG_CONFIG_HOME     where contexts are found (default ~/.config): <dir>/nats/context/<name>.json
  INTERLOCK_PREFIX    default of --prefix
  INTERLOCK_LOG_LEVEL default of --log-level
`

// mcpGatewayCmd runs `interlock mcp gateway`: the gateway, over stdio or
// streamable HTTP, against a running deployment.
func mcpGatewayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const name = "mcp gateway"
	fs := newFlagSet(name, "mcp gateway --config FILE [--http 127.0.0.1:PORT] [flags]", stderr)
	cf := &clientFlags{}
	fs.StringVar(&cf.url, "nats-url", "", "NATS server `url` of the deployment (default: $INTERLOCK_NATS_URL, else $NATS_URL, else the --context's, else "+wire.DefaultURL+")")
	fs.StringVar(&cf.creds, "creds", envOr("NATS_CREDS", ""), "NATS credentials `file` (default: $NATS_CREDS, else the --context's)")
	fs.StringVar(&cf.natsContext, "context", envOr("NATS_CONTEXT", ""), "natscli context `name` (~/.config/nats/context/NAME.json) or file giving url, creds, user, password and TLS files")
	fs.StringVar(&cf.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	config := fs.String("config", envOr("INTERLOCK_MCP_GATEWAY_CONFIG", ""), "YAML `file` listing the upstream MCP servers (name, command/args/env or url, prefix) and the gateway's agent, wait and repeatWindow")
	httpAddr := fs.String("http", "", "serve the streamable HTTP transport on `host:port` (at "+mcpPath+") instead of stdio; loopback only")
	wait := fs.Duration("wait", 0, "how long a call that needs approval waits for the decision (default: the config's wait, else 30s)")
	agent := fs.String("agent", "", "`name` of the agent in gate requests (default: the config's agent, else the MCP client's name)")
	logLevel := fs.String("log-level", envOr("INTERLOCK_LOG_LEVEL", "warn"), "`level` of what the gateway logs on stderr: trace, debug, info, warn, error")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) > 0 {
		return usageOf(name, "mcp gateway takes no arguments, but was given %s", quoteAll(pos))
	}
	if *config == "" {
		return usageOf(name, "mcp gateway needs --config FILE, a YAML file listing the MCP servers to front, such as:\n\nupstreams:\n  - name: files\n    command: mcp-server-filesystem\n    args: [\"/srv/shared\"]")
	}
	if *httpAddr != "" {
		if err := mcpserver.CheckAddr(*httpAddr, false); err != nil {
			return usageOf(name, "--http: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "mcpserver: "), "MCP server", "MCP gateway"))
		}
	}
	if *wait < 0 {
		return usageOf(name, "--wait is %s; give a positive duration such as 30s", *wait)
	}
	data, err := os.ReadFile(*config)
	if errors.Is(err, os.ErrNotExist) {
		return usageOf(name, "--config %s: no such file", *config)
	}
	if err != nil {
		return usagef("--config: %v", err)
	}
	cfg, err := mcpgateway.ParseConfig(data, *config)
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "mcpgateway: "))
	}
	for _, u := range cfg.Upstreams {
		if u.Command == "" {
			continue
		}
		if _, err := exec.LookPath(u.Command); err != nil {
			return usagef("%s: upstream %s: command %q: %v; give the program's path, or put it on PATH", *config, u.Name, u.Command, errors.Unwrap(err))
		}
	}
	if *wait > 0 {
		cfg.Wait = *wait
	}
	if *agent != "" {
		cfg.Agent = *agent
	}
	cfg.Stderr = stderr
	log, err := newLogger(stderr, *logLevel, "auto")
	if err != nil {
		return err
	}
	cfg.Logger = &log
	names, err := wire.NewNames(cf.prefix)
	if err != nil {
		return usagef("--prefix: %v", err)
	}
	conn, err := cf.connConfig()
	if err != nil {
		return err
	}
	conn.Name = "interlock-mcp-gateway"
	nc, js, err := wire.Connect(ctx, conn)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	defer nc.Close()
	gw, err := mcpgateway.New(remotePort{base: client.New(nc, js, names, "", 0), nc: nc, js: js, names: names}, cfg)
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "mcpgateway: "))
	}
	defer gw.Close()
	if err := gw.Start(ctx); err != nil {
		return fmt.Errorf("mcp gateway: %s", strings.TrimPrefix(err.Error(), "mcpgateway: "))
	}
	if *httpAddr == "" {
		return gw.Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: nopCloser{stdout}})
	}
	return serveMCPHTTP(ctx, "mcp gateway", gw.Handler(), func() { _ = gw.Close() }, *httpAddr, stdout, func(at string) string {
		return fmt.Sprintf("MCP gateway (streamable HTTP) on %s, fronting %d tools. Press Ctrl-C to stop.", at, len(gw.Tools()))
	})
}

var _ mcpgateway.Port = remotePort{}
