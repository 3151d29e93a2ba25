package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/interlockhq/interlock/client"
)

// Exit codes of the interlock command.
const (
	// exitOK: done, or the run advanced.
	exitOK = 0
	// exitFailed: anything else went wrong (a run failed, a run's audit
	// chain is broken, an I/O error).
	exitFailed = 1
	// exitUsage: the command line is wrong, or asks serve for a listener
	// beyond loopback without authentication.
	exitUsage = 2
	// exitRefused: Interlock refused the command, or the run or flow does
	// not exist or is not waiting.
	exitRefused = 3
	// exitReasked: an answer was taken but the same question is asked
	// again (a validator rejected it, or fields are still missing).
	exitReasked = 4
	// exitUnreachable: no NATS server could be reached, or no Interlock
	// worker answered within --wait.
	exitUnreachable = 5
)

// usageError is a mistake in the command line.
type usageError struct {
	msg string
	// hint follows the message: where to read the usage.
	hint string
	// err is the error the mistake was found by, if any.
	err error
}

func (u usageError) Error() string { return u.msg }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError is an outcome reported with an exit code. With reported set,
// the command has already printed it.
type exitError struct {
	code     int
	err      error
	reported bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// reported is the error of an outcome the command has already printed.
func reported(code int) error {
	return &exitError{code: code, err: fmt.Errorf("exit status %d", code), reported: true}
}

// codeOf maps an error of Run to the exit code.
func codeOf(err error) int {
	var u usageError
	var e *exitError
	var ref *client.RefusedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ref):
		return exitRefused
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &e):
		return e.code
	case errors.Is(err, client.ErrNoAnswer):
		return exitUnreachable
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrNotWaiting):
		return exitRefused
	}
	return exitFailed
}

// exitCode prints err on stderr, unless the command already reported it,
// and returns the exit code it maps to. main calls it with Run's error.
func exitCode(err error, stderr io.Writer) int {
	code := codeOf(err)
	if code == exitOK {
		return code
	}
	var e *exitError
	if errors.As(err, &e) && e.reported {
		return code
	}
	fmt.Fprintf(stderr, "interlock: %v\n", err)
	var u usageError
	if errors.As(err, &u) && u.hint != "" {
		fmt.Fprint(stderr, u.hint)
	}
	return code
}

const usage = `Interlock: durable interrupt-and-resume for agent flows and human approvals, on NATS JetStream.

Usage:
  interlock serve   [flags]                       run workers and the example flows
  interlock start   <flow> [field=value ...]      start a run
  interlock pending [--flow F]                    list runs waiting on an interrupt
  interlock runs    [--flow F] [--status S]       list runs of every status, newest first: what
                                                  waits, and what finished and how
  interlock show    <flow> <run>                  show a run's checkpoint
  interlock flows                                 list each flow's versions: which the running
                                                  workers have, and how many runs wait on each
  interlock answer  <flow> <run> [field=value ...] [--select ID ...]
                                                  answer a run's pending question or choice
  interlock answer  <flow> <run> --approve | --reject [--reason TEXT] | --edit field=value ...
                                                  decide a run's pending approval
  interlock answer  <flow> <run> --respond --message TEXT
                                                  answer whoever asked instead, where the approval
                                                  lists respond (the action does not run)
  interlock assign  claim|release|delegate <flow> <run> [--to PERSON|role:NAME]
                                                  claim a pending approval (then only you may decide
                                                  it), release it, or hand it to a person or role
  interlock cancel  <flow> <run>                  cancel a waiting run
  interlock reannounce <flow> <run>               announce a waiting run's interrupt again,
                                                  with a fresh token (the old one is retired)
  interlock events  <flow> <run>                  show a run's events the events stream still holds
  interlock audit   <flow> <run>                  show a run's audit history, one line a record,
                                                  marking records that cannot be vouched for
  interlock audit verify <flow> <run> [--key KEY] check each record's signature and the hash chain
  interlock audit key                             print the public keys audit records are signed with
  interlock receipt verify [--key KEY] [RECEIPT|FILE|-]
                                                  check a decision's signed receipt, offline with --key
  interlock gate request <tool> [arg=value ...]   ask the tool-call gate whether a call may run,
                                                  and wait for the decision
  interlock ask     question|choice|approval <text> ...
                                                  put one question, choice or approval in front of
                                                  people without a flow, and wait for the answer
  interlock ask status <askId>                    how an ask settled, or what it waits on
  interlock people add <name> [--role ROLE ...] [--email A] [--slack U] [--teams UPN] [--token] --people FILE
                                                  add a person to the directory (with --token, print
                                                  their bearer token for the HTTP API and the inbox)
  interlock people list|remove|rotate-token [<name>] --people FILE
                                                  list the people, remove one, or give one a new token
  interlock people import [--auth-file F] [--slack-config F]
                                                  print a directory of the older files' people
  interlock away    show|set|end                  name a delegate while you are away (set --delegate NAME
                                                  --to TIME), see whom you decide for, or end it (HTTP API)
  interlock people clear [--data-dir DIR]         delete the directory from the configuration bucket,
                                                  so that serve without --people serves the local user
  interlock auth add|list|remove ... --auth-file FILE
                                                  edit an older auth file (interlock people replaces it)
  interlock webhooks list                         list the outbound webhook subscriptions in force
  interlock webhooks deliveries [--subscription S] [--status delivered|retrying|dead]
                                                  show webhook deliveries, newest first
  interlock mcp     [--http 127.0.0.1:PORT]       serve flows and the tool-call gate to models over MCP
                                                  (stdio, or streamable HTTP), against a running deployment
  interlock mcp gateway --config FILE             gate every tool call of other MCP servers (see docs/mcp-gateway.md)
  interlock schema  [--asyncapi | NAME]           print the wire contract: AsyncAPI, JSON Schemas
  interlock version                               print the version, commit, Go and nats-server
                                                  of this binary (also: interlock --version)
  interlock help    [command]                     show help

Values: field=value sends a string; field:=JSON sends any JSON (n:=3, ok:=true).
Flags may come before or after the command: interlock --json show booking r-1.
Run "interlock help <command>" for its flags and environment variables.

Exit codes:
  0  done, or the run advanced
  1  failed (the run failed, audit verify cannot vouch for every record, or another error)
  2  bad usage (also: serve refused a listener beyond loopback without authentication:
     --listen, --http, --metrics or --cluster-listen)
  3  refused (also: no such run or flow, or the run is not waiting)
  4  asked again (an answer was rejected by a validator, or fields are missing)
  5  cannot reach the NATS server, or no Interlock worker answered in time
`

// globalBool reports whether a flag that may come before the command is
// boolean, so takes no value from the next argument.
func globalBool(name string) bool {
	name, _, _ = strings.Cut(name, "=")
	switch name {
	case "json", "lazy-fsync", "insecure-no-auth", "approve", "reject", "respond", "http-insecure-public":
		return true
	}
	return false
}

// Run runs the interlock command with args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	// Flags before the command belong to it: move them after it.
	var pre []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" && args[0] != "--" && !isHelp(args[0]) {
		pre = append(pre, args[0])
		name := strings.TrimLeft(args[0], "-")
		args = args[1:]
		if !strings.Contains(name, "=") && !globalBool(name) && len(args) > 0 {
			pre = append(pre, args[0])
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return usageError{msg: "no command given", hint: usage}
	}
	cmd, rest := args[0], append(pre, args[1:]...)
	if wantsHelp(rest) {
		stderr = stdout // asked-for help is output, not a complaint
	}
	err := dispatch(ctx, cmd, rest, stdout, stderr)
	var u usageError
	if errors.As(err, &u) && u.hint == "" {
		u.hint = helpHint(cmd)
		return u
	}
	return err
}

func dispatch(ctx context.Context, cmd string, rest []string, stdout, stderr io.Writer) error {
	switch cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "start":
		return startCmd(ctx, rest, stdout, stderr)
	case "pending", "ls":
		return pendingCmd(ctx, rest, stdout, stderr)
	case "runs":
		return runsCmd(ctx, rest, stdout, stderr)
	case "show":
		return showCmd(ctx, rest, stdout, stderr)
	case "flows":
		return flowsCmd(ctx, rest, stdout, stderr)
	case "answer", "resume":
		return answerCmd(ctx, rest, stdout, stderr)
	case "cancel":
		return cancelCmd(ctx, rest, stdout, stderr)
	case "assign":
		return assignCmd(ctx, rest, stdout, stderr)
	case "reannounce":
		return reannounceCmd(ctx, rest, stdout, stderr)
	case "audit":
		return auditCmd(ctx, rest, stdout, stderr)
	case "receipt":
		return receiptCmd(ctx, rest, stdout, stderr)
	case "events":
		return eventsCmd(ctx, rest, stdout, stderr)
	case "gate":
		return gateCmd(ctx, rest, stdout, stderr)
	case "ask":
		return askCmd(ctx, rest, stdout, stderr)
	case "auth":
		return authCmd(ctx, rest, stdout, stderr)
	case "people":
		return peopleCmd(ctx, rest, stdout, stderr)
	case "away":
		return awayCmd(ctx, rest, stdout, stderr)
	case "webhooks":
		return webhooksCmd(ctx, rest, stdout, stderr)
	case "schema":
		return schemaCmd(ctx, rest, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, rest, stdout, stderr)
	case "version":
		return versionCmd(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			if rest[0] == "help" {
				fmt.Fprint(stdout, usage)
				return nil
			}
			if (rest[0] == "mcp" && len(rest) > 1 && rest[1] == "gateway") || (rest[0] == "people" && len(rest) > 1 && rest[1] == "clear") {
				return Run(ctx, []string{rest[0], rest[1], "-h"}, stdout, stderr)
			}
			return Run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError{msg: fmt.Sprintf("unknown command %q", cmd), hint: usage}
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// parse parses flags and positional arguments in any order. Asked for help,
// it prints the flag set's usage and returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if wantsHelp(args) {
		fs.Usage()
		return nil, flag.ErrHelp
	}
	// Mistakes are returned, not printed: the error says what is wrong and
	// points at the help.
	full, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = full; fs.SetOutput(out) }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{msg: fs.Name() + ": " + err.Error(), hint: helpHint(fs.Name())}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func helpHint(cmd string) string {
	return fmt.Sprintf("Run \"interlock help %s\" for its usage.\n", cmd)
}

// usageOf returns a usage error for cmd with the hint to its help.
func usageOf(cmd, format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), hint: helpHint(cmd)}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: interlock %s\n", synopsis)
		if about := aboutHelp(name); about != "" {
			fmt.Fprintf(w, "\n%s", about)
		}
		fmt.Fprintf(w, "\nFlags:\n")
		fs.PrintDefaults()
		if env := envHelp(name); env != "" {
			fmt.Fprintf(w, "\nEnvironment:\n%s", env)
		}
		fmt.Fprintf(w, "\n%s", exitHelp(name))
	}
	return fs
}

// aboutHelp says what a command does, where its flags do not.
func aboutHelp(cmd string) string {
	switch cmd {
	case "answer":
		return `A question or choice takes field=value answers or --select; an approval
takes one decision: --approve, --reject, or --edit (approve with args changed).
`
	case "mcp gateway":
		return mcpGatewayAbout
	case "receipt":
		return receiptAbout
	case "mcp":
		return `mcp serves the Model Context Protocol to a model's client (Claude Desktop, an IDE,
an agent framework) against a running deployment: tools to list and start flows,
answer their interrupts, read runs and the runs waiting, and ask the tool-call
gate. It speaks over stdio unless --http is given. Resume tokens never reach the
model: with the deployment's secret the server vouches for --approver; without it,
it keeps each interrupt's token for the MCP session that saw it. See docs/mcp.md.
`
	case "audit":
		return `audit prints a run's audit records, oldest first, one line each: the
record's position in the chain (- for a refusal), time, action, who, node,
kind, and what was decided (an approval's args, an edit's args before → after,
a reason, a refusal's code). A message the verifier cannot vouch for is marked
! and shown as UNVOUCHED, with what it claims and why it is not vouched for,
never as a decision. With --json it prints each message as a JSON object:
streamSeq, vouched, the checks it failed, and the record as stored, so that a
script can recompute its hash.

audit verify checks every message on the run's audit subject: that it is a
well-formed record of the run; that its hash (the SHA-256 of its canonical JSON
without "hash" and "sig") matches its contents; that its signature (sig, by the
key kid names) verifies with a trusted key, which are the keys the workers
published in <prefix>_config audit.keys, or those given with --key; that a
side record is a refusal. It checks that the records follow each other (seq 1,
2, 3, each naming the one before in prev), that every refusal names a record
of the chain, and that the last record is the head the run's checkpoint holds.
It prints "audit chain of <flow> <run> intact: ..." and the keys that signed,
or each record it cannot vouch for and why (unsigned, signed with an unknown
key, bad signature, a side record that is no refusal, out of the chain,
malformed, not an audit record at all) and where the chain breaks, exiting 1.
Records written before Interlock signed audit records are reported unsigned.

audit key prints the public keys the workers published (each worker adds the
key of its secret at start; none is ever removed). Anyone who may write the
config bucket may add one: check a key against the one "interlock serve"
printed at start, then pin it with --key.
`
	}
	return ""
}

// exitHelp lists a command's exit codes.
func exitHelp(cmd string) string {
	if cmd == "gate" {
		return "Exit codes: 0 the call may run (allowed, approved or edited), 1 failed, 2 bad usage, 3 the call may not run (rejected or expired), 4 still waiting for a decision after --wait, 5 server unreachable or no worker serves the gate.\n"
	}
	if cmd == "mcp" || cmd == "mcp gateway" {
		return "Exit codes: 0 stopped (the MCP client went away, or Ctrl-C), 1 failed, 2 bad usage, 5 server unreachable.\n"
	}
	if cmd == "serve" {
		return "Exit codes: 0 stopped (Ctrl-C or SIGTERM), 1 failed, 2 bad usage, or a listener beyond loopback without authentication (--listen, --http, --metrics, --cluster-listen) refused at start, before anything serves.\n"
	}
	if cmd == "audit" {
		return "Exit codes: 0 done (verify: every record is vouched for and the chain is intact), 1 failed (verify: a record cannot be vouched for, or the chain is broken; which and why is printed on stdout), 2 bad usage, 3 no such run or flow, 5 server unreachable.\n"
	}
	if cmd == "receipt" {
		return "Exit codes: 0 the receipt verifies and holds, 1 it does not verify or has expired (why is printed), 2 bad usage, 5 server unreachable (without --key).\n"
	}
	return "Exit codes: 0 done, 1 failed, 2 bad usage, 3 refused, 4 asked again, 5 server unreachable.\n"
}

// envHelp lists the environment variables a command reads.
func envHelp(cmd string) string {
	switch cmd {
	case "people":
		return "  INTERLOCK_PEOPLE  default of --people\n"
	case "away":
		return "  INTERLOCK_URL    default of --api\n  INTERLOCK_TOKEN  default of --token\n"
	case "serve":
		return `  INTERLOCK_SERVE_NATS_URL  default of --nats-url: use this NATS server instead of embedding one
  INTERLOCK_CREDS           default of --creds
  INTERLOCK_NATS_CONFIG     default of --nats-config
  INTERLOCK_NATS_USER       default of --nats-user
  INTERLOCK_WORKERS_PASSWORD  the workers' password (with --nats-config or --nats-url; never a flag)
  INTERLOCK_LISTEN          default of --listen
  INTERLOCK_SERVER_NAME     default of --server-name
  INTERLOCK_CLUSTER_NAME    default of --cluster-name
  INTERLOCK_CLUSTER_LISTEN  default of --cluster-listen
  INTERLOCK_ROUTES          default of --routes
  INTERLOCK_REPLICAS        default of --replicas
  INTERLOCK_DATA_DIR        default of --data-dir
  INTERLOCK_PREFIX          default of --prefix
  INTERLOCK_SECRET          the resume-token secret, when --secret-file is not given
  INTERLOCK_INSTANCE        default of --instance
  INTERLOCK_GATE_RULES      default of --gate-rules
  INTERLOCK_HTTP            default of --http
  INTERLOCK_AUTH_FILE       default of --auth-file
  INTERLOCK_PUBLIC_URL      default of --public-url
  INTERLOCK_PEOPLE          default of --people
  INTERLOCK_SLACK_CONFIG    default of --slack-config
  INTERLOCK_WEBHOOKS        default of --webhooks
  INTERLOCK_A2A_AGENTS      default of --a2a-agents: remote A2A agents whose questions people answer
  INTERLOCK_ASK_CALLBACK_SECRET  no longer used: asks' callbacks carry a receipt (serve warns when set)
  INTERLOCK_EGRESS_ALLOW    default of --egress-allow: internal destinations the outbound calls may reach
  INTERLOCK_READ_ROLES      default of --read-role: roles that read every ask and tool call
  INTERLOCK_CANCEL_ROLES    default of --cancel-role: roles that cancel any run
  SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET  the Slack bridge's credentials, unless its file names others
  INTERLOCK_LOG_LEVEL       default of --log-level
  INTERLOCK_METRICS         default of --metrics

Tracing (OpenTelemetry; off unless an endpoint is set, see docs/operations.md):
  OTEL_EXPORTER_OTLP_ENDPOINT         send traces over OTLP/HTTP to this collector URL
                                      (http://host:4318; /v1/traces is appended)
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the full traces URL, instead of the above
  OTEL_EXPORTER_OTLP_PROTOCOL         http/protobuf (default) or http/json; grpc is refused
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL  the same, for traces only
  OTEL_EXPORTER_OTLP_HEADERS          key=value,... headers of each export (credentials)
  OTEL_EXPORTER_OTLP_CERTIFICATE      CA file of the collector's TLS (and _CLIENT_CERTIFICATE, _CLIENT_KEY)
  OTEL_EXPORTER_OTLP_TIMEOUT          milliseconds an export may take (default 10000)
  OTEL_SERVICE_NAME                   service.name of the traces (default interlock)
  OTEL_RESOURCE_ATTRIBUTES            key=value,... resource attributes of the traces
  OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG  sampler (default parentbased_always_on)
  OTEL_SDK_DISABLED                   true turns tracing off
`
	case "mcp gateway":
		return mcpGatewayEnv
	case "mcp":
		return `  INTERLOCK_NATS_URL  NATS server URL when --nats-url is not given
  NATS_URL            NATS server URL when neither --nats-url nor INTERLOCK_NATS_URL is set
  NATS_CREDS          default of --creds
  NATS_CONTEXT        default of --context
  XDG_CONFIG_HOME     where contexts are found (default ~/.config): <dir>/nats/context/<name>.json
  INTERLOCK_PREFIX    default of --prefix
  INTERLOCK_SECRET    the deployment's resume-token secret, when --secret-file is not given
  INTERLOCK_MCP_HTTP  default of --http
  INTERLOCK_MCP_APPROVER  default of --approver
  INTERLOCK_AS        default of --approver when INTERLOCK_MCP_APPROVER is not set
`
	case "start", "answer", "show", "cancel", "assign", "pending", "runs", "reannounce", "audit", "gate", "webhooks", "receipt", "flows":
		return `  INTERLOCK_NATS_URL  NATS server URL when --nats-url is not given
  NATS_URL            NATS server URL when neither --nats-url nor INTERLOCK_NATS_URL is set
  NATS_CREDS          default of --creds
  NATS_CONTEXT        default of --context
  XDG_CONFIG_HOME     where contexts are found (default ~/.config): <dir>/nats/context/<name>.json
  INTERLOCK_PREFIX    default of --prefix
  INTERLOCK_SOURCE    default of --source
`
	}
	return ""
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
