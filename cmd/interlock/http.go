package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aremote"
	"github.com/interlockhq/interlock/a2aserver"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/webpush"
)

// httpFlags are serve's flags of the HTTP API.
type httpFlags struct {
	addr      *string
	authFile  *string
	publicURL *string
	a2aAgents *string
}

func addHTTPFlags(fs *flag.FlagSet) httpFlags {
	return httpFlags{
		addr:      fs.String("http", envOr("INTERLOCK_HTTP", httpapi.DefaultAddr), "`host:port` of the HTTP API (\"\" turns it off); beyond loopback it needs the directory of people (--people)"),
		authFile:  fs.String("auth-file", envOr("INTERLOCK_AUTH_FILE", ""), "the older YAML `file` of the HTTP API's callers, read into the directory of people (interlock people import moves it; use --people)"),
		publicURL: fs.String("public-url", envOr("INTERLOCK_PUBLIC_URL", ""), "the `URL` people and systems reach the HTTP API at (https://interlock.example.com), which decision links in mails and callback URLs begin with; defaults to http:// and the --http address"),
		a2aAgents: fs.String("a2a-agents", envOr("INTERLOCK_A2A_AGENTS", ""), "YAML `file` of remote A2A agents whose tasks Interlock follows (POST /a2a/follow) to ask people their questions (see docs/a2a.md); each agent's token comes from the environment variable the file names"),
	}
}

// authFileInUse is --auth-file, when the HTTP API is on: config says
// that the file is for the API otherwise.
func (f httpFlags) authFileInUse() string {
	if *f.addr == "" {
		return ""
	}
	return *f.authFile
}

// config checks the flags, before anything starts, and returns the API's
// configuration; ok is false when the API is off.
func (f httpFlags) config(log *zerolog.Logger, dir func() *people.Directory) (cfg httpapi.Config, ok bool, err error) {
	if *f.addr == "" {
		if *f.authFile != "" {
			return cfg, false, usagef("--auth-file is for the HTTP API, which --http \"\" turns off")
		}
		if *f.publicURL != "" {
			return cfg, false, usagef("--public-url is the HTTP API's, which --http \"\" turns off")
		}
		if *f.a2aAgents != "" {
			return cfg, false, usagef("--a2a-agents is followed on the HTTP API (POST /a2a/follow), which --http \"\" turns off")
		}
		return cfg, false, nil
	}
	if *f.a2aAgents != "" {
		// Read now, so that a wrong file stops serve before anything starts.
		b, err := os.ReadFile(*f.a2aAgents)
		if err != nil {
			return cfg, false, usagef("--a2a-agents: %v", err)
		}
		if _, err := a2aremote.Parse(b, *f.a2aAgents, os.Getenv); err != nil {
			return cfg, false, usagef("--a2a-agents: %v", err)
		}
	}
	if _, _, err := net.SplitHostPort(*f.addr); err != nil {
		return cfg, false, usagef("--http %q: %v; use host:port such as %s, or \"\" to turn the API off", *f.addr, err, httpapi.DefaultAddr)
	}
	cfg = httpapi.Config{Addr: *f.addr, PublicURL: *f.publicURL, Logger: log, People: dir}
	if *f.authFile != "" {
		if cfg.Auth, err = httpapi.LoadAuth(*f.authFile); err != nil {
			return cfg, false, usagef("--auth-file: %s", strings.TrimPrefix(err.Error(), "httpapi: "))
		}
	}
	if err := cfg.Validate(); errors.Is(err, httpapi.ErrNoAuth) {
		return cfg, false, usageError{err: err, msg: fmt.Sprintf("--http %s listens beyond loopback without --auth-file or --people: anyone who reaches it could decide every approval as the local user; "+
			"give --people FILE (add people with interlock people add NAME --token), or the older --auth-file FILE (interlock auth add), or listen on 127.0.0.1", *f.addr)}
	} else if err != nil && strings.Contains(err.Error(), "Config.PublicURL") {
		return cfg, false, usagef("--public-url: %s", strings.TrimPrefix(err.Error(), "httpapi: Config.PublicURL "))
	} else if err != nil {
		return cfg, false, usagef("--http %s: %s", *f.addr, strings.TrimPrefix(err.Error(), "httpapi: "))
	}
	return cfg, true, nil
}

// startHTTP starts the HTTP API on svc, stopped with it, says where, and
// returns its public URL, where links to it begin.
func startHTTP(ctx context.Context, svc *interlock.Service, cfg httpapi.Config, agents string, push func() *webpush.Devices, stdout io.Writer) (string, error) {
	cfg.Links, cfg.Uses = svc.Links(), svc.LinkUses()
	api, err := httpapi.New(svc, cfg)
	if err != nil {
		return "", err
	}
	in, err := inbox.New(svc, inbox.Config{Auth: cfg.Auth, Links: cfg.Links, Uses: cfg.Uses, People: cfg.People, Push: push, Logger: cfg.Logger})
	if err != nil {
		return "", err
	}
	in.Register(api)
	agent, err := a2aserver.New(svc, a2aserver.Config{PublicURL: api.PublicURL, Logger: cfg.Logger})
	if err != nil {
		return "", err
	}
	agent.Register(api)
	// Started whole even when a stop comes meanwhile, as the other
	// followers of the events are: the stop then stops it.
	start, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelStartTimeout)
	defer cancel()
	if err := svc.Attach(start, agent); err != nil {
		return "", err
	}
	if agents != "" {
		remote, err := startRemote(start, svc, agents, cfg.Logger)
		if err != nil {
			return "", err
		}
		remote.Register(api)
	}
	if err := svc.Attach(ctx, api); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "HTTP API on http://%s (%s).\n", api.Addr(), tryHTTP(cfg, api.Addr()))
	fmt.Fprintf(stdout, "Inbox on http://%s/ (open it in a browser).\n", api.Addr())
	fmt.Fprintf(stdout, "A2A agent on http://%s%s (its card: %s).\n", api.Addr(), a2aserver.Path, a2aserver.CardPath)
	return api.PublicURL(), nil
}

// tryHTTP is a command that lists the pending interrupts of an API
// listening on addr, as this machine reaches it: with an auth file it
// sends a caller's token, from $TOKEN.
func tryHTTP(cfg httpapi.Config, addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
			if h, _, _ := net.SplitHostPort(cfg.Addr); strings.Contains(h, ":") {
				host = "::1" // an IPv6 address was asked for
			}
		}
		addr = net.JoinHostPort(host, port)
	}
	if cfg.Auth == nil && (cfg.People == nil || cfg.People() == nil) {
		return fmt.Sprintf("try: curl http://%s/v1/interrupts", addr)
	}
	return fmt.Sprintf(`try, with a token from interlock people add --token: curl -H "Authorization: Bearer $TOKEN" http://%s/v1/interrupts`, addr)
}

// authUsage says how to run the auth commands.
const authUsage = "use: interlock auth add <name> --role ROLE --auth-file FILE, interlock auth list --auth-file FILE, or interlock auth remove <name> --auth-file FILE"

// authCmd runs `interlock auth add NAME --role ROLE ... --auth-file FILE`,
// `interlock auth list --auth-file FILE` and `interlock auth remove NAME
// --auth-file FILE`.
func authCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("auth", `auth add <name> --role ROLE [--role ROLE ...] --auth-file FILE
       interlock auth list --auth-file FILE
       interlock auth remove <name> --auth-file FILE`, stderr)
	var roles listFlag
	fs.Var(&roles, "role", "approver `role` the caller holds (repeat for more); none lets them answer questions and choices only (auth add)")
	file := fs.String("auth-file", "", "the API's auth `file` (auth add creates it, mode 0600, if it does not exist)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) == 0 {
		return usageOf("auth", authUsage)
	}
	fmt.Fprintf(stderr, "interlock auth is replaced by interlock people (add, list, remove, rotate-token) on a --people FILE; move this file with: interlock people import --auth-file %s > people.yaml\n", cmp.Or(*file, "FILE"))
	sub, names := pos[0], pos[1:]
	switch {
	case sub != "add" && sub != "list" && sub != "remove":
		return usageOf("auth", "unknown auth command %q; %s", sub, authUsage)
	case sub == "list" && len(names) != 0:
		return usageOf("auth", "auth list takes no name, but was given %s: interlock auth list --auth-file FILE", quoteAll(names))
	case sub != "list" && len(names) != 1:
		return usageOf("auth", "auth %s takes one name, got %d", sub, len(names))
	case *file == "":
		return usageOf("auth", "auth %s needs --auth-file FILE", sub)
	case sub != "add" && len(roles) > 0:
		return usageOf("auth", "--role is for auth add; to change a caller's roles, remove them and add them again (with a new token), or edit the file")
	}
	switch sub {
	case "list":
		return authList(*file, stdout)
	case "remove":
		if err := httpapi.RemoveCaller(*file, names[0]); err != nil {
			return plainAuthError("auth remove", err)
		}
		fmt.Fprintf(stdout, "Removed %s from %s. Their token stops working once serve reads the file again, about a second after the change.\n", names[0], *file)
		return nil
	}
	if err := httpapi.CheckCallerName(names[0]); err != nil {
		return usageOf("auth", "%v", err)
	}
	for _, r := range roles {
		if err := httpapi.CheckRole(r); err != nil {
			return usageOf("auth", "--role: %v", err)
		}
	}
	token, err := httpapi.AddCaller(*file, names[0], roles)
	if err != nil {
		return plainAuthError("auth add", err)
	}
	held := "no role"
	if len(roles) > 0 {
		held = "roles " + strings.Join(roles, ", ")
	}
	fmt.Fprintf(stderr, "Added %s (%s) to %s. Their bearer token follows; it is shown only this once (the file keeps its SHA-256):\n", names[0], held, *file)
	fmt.Fprintln(stdout, token)
	return nil
}

// authList prints the callers of an auth file: names and roles, never
// their token's hash.
func authList(file string, stdout io.Writer) error {
	entries, err := httpapi.ReadAuthFile(file)
	if err != nil {
		return plainAuthError("auth list", err)
	}
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "%s has no callers; add one with: interlock auth add NAME --role ROLE --auth-file %s\n", file, file)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES")
	for _, e := range entries {
		held := "-"
		if len(e.Roles) > 0 {
			held = strings.Join(e.Roles, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\n", e.Name, held)
	}
	return tw.Flush()
}

// plainAuthError is an error of the auth file, said for the command line:
// the command, not the Go package, begins it.
func plainAuthError(cmd string, err error) error {
	return fmt.Errorf("%s: %w", cmd, stripped{err, strings.TrimPrefix(err.Error(), "httpapi: ")})
}

// stripped is an error said in other words, which unwraps to it.
type stripped struct {
	err error
	msg string
}

func (s stripped) Error() string { return s.msg }
func (s stripped) Unwrap() error { return s.err }

// startRemote reads the file of remote A2A agents and starts following
// their tasks.
func startRemote(ctx context.Context, svc *interlock.Service, file string, log *zerolog.Logger) (*a2aremote.Remote, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef("--a2a-agents: %v", err)
	}
	agents, err := a2aremote.Parse(b, file, os.Getenv)
	if err != nil {
		return nil, usagef("--a2a-agents: %v", err)
	}
	r, err := a2aremote.New(svc, a2aremote.Config{Agents: agents, Logger: log})
	if err != nil {
		return nil, usagef("--a2a-agents: %v", err)
	}
	return r, svc.Attach(ctx, r)
}
