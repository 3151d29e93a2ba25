package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	url, creds, natsContext, prefix, source, inbox, as string
	json                                               bool
	wait                                               time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", "", "NATS server `url` (default: $INTERLOCK_NATS_URL, else $NATS_URL, else the --context's, else "+wire.DefaultURL+")")
	fs.StringVar(&c.creds, "creds", envOr("NATS_CREDS", ""), "NATS credentials `file` (default: $NATS_CREDS, else the --context's)")
	fs.StringVar(&c.natsContext, "context", envOr("NATS_CONTEXT", ""), "natscli context `name` (~/.config/nats/context/NAME.json) or file giving url, creds, user, password and TLS files")
	fs.StringVar(&c.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	fs.StringVar(&c.inbox, "inbox-prefix", envOr("NATS_INBOX_PREFIX", ""), "`prefix` of the connection's reply subjects, such as _INBOX_bot for user bot of deploy/interlock-auth.conf (default: $NATS_INBOX_PREFIX, else the --context's, else _INBOX)")
	fs.StringVar(&c.source, "source", envOr("INTERLOCK_SOURCE", "/cli"), "CloudEvents `source` of what you send")
	fs.StringVar(&c.as, "as", envOr("INTERLOCK_AS", loginName()), "`name` the audit stream knows you by, and a decision's approver (default: $INTERLOCK_AS, else your login name, else $USER or $USERNAME)")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
	fs.DurationVar(&c.wait, "wait", client.DefaultWait, "how long to wait for the outcome")
}

// connConfig resolves where and how to connect: flags first, then the
// environment, then the natscli context, then the default URL.
func (c *clientFlags) connConfig() (wire.ConnConfig, error) {
	cfg := wire.ConnConfig{Name: "interlock-cli"}
	var nc natsContext
	if c.natsContext != "" {
		var err error
		if nc, err = loadNATSContext(c.natsContext); err != nil {
			return wire.ConnConfig{}, usageError{msg: "--context: " + err.Error()}
		}
	}
	cfg.URL = firstOf(c.url, os.Getenv("INTERLOCK_NATS_URL"), os.Getenv("NATS_URL"), nc.URL, wire.DefaultURL)
	cfg.CredsFile = firstOf(c.creds, nc.Creds)
	cfg.User, cfg.Password = nc.User, nc.Password
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = nc.Cert, nc.Key, nc.CA
	cfg.InboxPrefix = firstOf(c.inbox, nc.InboxPrefix)
	return cfg, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (c *clientFlags) dial(ctx context.Context) (*client.Client, func(), error) {
	names, err := wire.NewNames(c.prefix)
	if err != nil {
		return nil, nil, usageError{msg: "--prefix: " + err.Error()}
	}
	cfg, err := c.connConfig()
	if err != nil {
		return nil, nil, err
	}
	nc, js, err := wire.Connect(ctx, cfg)
	if err != nil {
		return nil, nil, &exitError{code: exitUnreachable, err: err}
	}
	return client.New(nc, js, names, c.source, c.wait).As(c.as), nc.Close, nil
}

// loginName is the name of the user running the command, or "".
func loginName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return cmp.Or(os.Getenv("USER"), os.Getenv("USERNAME"))
}

// checkArgs checks the positional arguments of a client command, before
// anything else happens, and says in plain words what is missing or extra.
func checkArgs(name string, pos []string, min int) error {
	switch name {
	case "start":
		if len(pos) < 1 {
			return usageOf(name, "start needs a flow name: interlock start <flow> [field=value ...]")
		}
	case "answer":
		if len(pos) < 2 {
			return usageOf(name, "answer needs a flow and a run: interlock answer <flow> <run> field=value ...")
		}
	case "assign":
		if len(pos) < 3 {
			return usageOf(name, "assign needs an op, a flow and a run: interlock %s", assignSynopsis)
		}
		if len(pos) > 3 {
			return usageOf(name, "assign takes an op, a flow and a run, but was also given %s: interlock %s", quoteAll(pos[3:]), assignSynopsis)
		}
	case "show", "cancel", "reannounce", "events":
		if len(pos) < 2 {
			return usageOf(name, "%s needs a flow and a run: interlock %s <flow> <run>", name, name)
		}
		if len(pos) > 2 {
			return usageOf(name, "%s takes a flow and a run, but was also given %s: interlock %s <flow> <run>", name, quoteAll(pos[2:]), name)
		}
	case "audit":
		what, args := "audit", pos
		if len(pos) > 0 && pos[0] == "key" {
			if len(pos) > 1 {
				return usageOf(name, "audit key takes no arguments, but was given %s: interlock audit key", quoteAll(pos[1:]))
			}
			return nil
		}
		if len(pos) > 0 && pos[0] == "verify" {
			what, args = "audit verify", pos[1:]
		}
		if len(args) < 2 {
			return usageOf(name, "%s needs a flow and a run: interlock %s <flow> <run>", what, what)
		}
		if len(args) > 2 {
			return usageOf(name, "%s takes a flow and a run, but was also given %s: interlock %s <flow> <run>", what, quoteAll(args[2:]), what)
		}
	case "runs migrate":
		if len(pos) != 1 {
			return usageOf("runs", "runs migrate takes one flow: interlock %s", runsMigrateSynopsis)
		}
	case "pending", "runs":
		if len(pos) > 0 {
			return usageOf(name, "%s takes no arguments, but was given %s; to list one flow's runs: interlock %s --flow %s", name, quoteAll(pos), name, pos[0])
		}
	default:
		if len(pos) < min {
			return usageOf(name, "%s needs %d arguments", name, min)
		}
	}
	return nil
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// clientCommand parses a client command's flags and positional arguments
// (at least npos); check, if set, validates them before any connection is
// made. It then connects, and returns the client and a function that
// closes the connection.
func clientCommand(ctx context.Context, name, synopsis string, stderr io.Writer, args []string, npos int,
	extra func(*flag.FlagSet), check func(pos []string) error,
) (*clientFlags, *client.Client, []string, func(), error) {
	fs := newFlagSet(name, synopsis, stderr)
	cf := &clientFlags{}
	cf.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parse(fs, args)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := checkArgs(name, pos, npos); err != nil {
		return nil, nil, nil, nil, err
	}
	if check != nil {
		if err := check(pos); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	c, closeFn, err := cf.dial(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cf, c, pos, closeFn, nil
}

func helpOK(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// checkFlowRun checks the names of a flow and run given on the command line.
func checkFlowRun(pos []string) error {
	if err := checkName("flow", pos[0]); err != nil {
		return err
	}
	return checkName("run", pos[1])
}

// checkName checks a flow name or run id given on the command line.
func checkName(what, name string) error {
	if err := protocol.CheckName(what, name); err != nil {
		return usageError{msg: strings.TrimPrefix(err.Error(), "client: ")}
	}
	return nil
}
