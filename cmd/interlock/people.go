package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/slackbridge"
)

// peopleFlags are serve's flags of the directory of people.
type peopleFlags struct {
	file *string
}

func addPeopleFlags(fs *flag.FlagSet) peopleFlags {
	return peopleFlags{
		file: fs.String("people", envOr("INTERLOCK_PEOPLE", ""), "YAML `file` of the directory of people: names, roles, bearer-token hashes, Slack, e-mail and Teams handles, and each role's channels (see interlock people add); it is put in the configuration bucket at start and whenever it changes. Without it the bucket's directory (nats kv put <prefix>_config people), if any, is used"),
	}
}

// peopleSetup is the directory of people of a serve: the Live every
// surface authenticates against, and what feeds it.
type peopleSetup struct {
	live *people.Live
	file string
	// auth is the older auth file's path; slack the Slack configuration's
	// users and channels as a directory (nil: none, or not movable).
	auth  string
	slack *people.Directory
	log   zerolog.Logger

	watches []*people.FileWatch
}

// setup reads the files, before anything starts: a file that does not
// parse, or files that disagree, are bad usage. It returns the Live the
// HTTP API, the inbox and the Slack bridge are given, holding the
// directory of --people (or none, until the bucket's is read).
func (f peopleFlags) setup(log zerolog.Logger, authFile string, slack *slackbridge.Config, slackFile string) (*peopleSetup, error) {
	if slackFile == "" {
		slack = nil
	}
	s := &peopleSetup{file: *f.file, auth: authFile, log: log}
	var file, auth *people.Directory
	var err error
	if s.file != "" {
		if file, err = people.ReadFile(s.file); err != nil {
			return nil, usagef("--people: %s", strings.TrimPrefix(err.Error(), "people: "))
		}
	}
	if authFile != "" {
		if auth, err = authDirectory(authFile); err != nil {
			return nil, usagef("--auth-file: %s", strings.TrimPrefix(err.Error(), "httpapi: "))
		}
		log.Warn().Str("auth_file", authFile).Msgf("--auth-file is read as a directory of people; move to --people FILE (interlock people import --auth-file %s > people.yaml)", authFile)
	}
	if slack != nil && (len(slack.Users) > 0 || len(slack.Channels) > 0) {
		if s.slack, err = slack.Directory(slackFile); err != nil {
			log.Warn().Err(err).Msg("--slack-config: its users stay the Slack bridge's own; the directory of people does not know them")
		} else {
			log.Warn().Str("slack_config", slackFile).Msgf("--slack-config's users and channels are read into the directory of people; move them to --people FILE (interlock people import --slack-config %s > people.yaml)", slackFile)
		}
	}
	if _, err := people.Merge("the directory", file, auth, s.slack); err != nil {
		return nil, usagef("--people, --auth-file and --slack-config disagree: %s", strings.TrimPrefix(err.Error(), "people: "))
	}
	s.live = people.NewLive(file)
	if err := s.live.SetLocal(mustMerge(auth, s.slack)); err != nil {
		return nil, usagef("%s", err)
	}
	return s, nil
}

// mustMerge merges the local files, which setup has checked agree.
func mustMerge(auth, slack *people.Directory) *people.Directory {
	d, _ := people.Merge("the older files", auth, slack)
	return d
}

// authDirectory reads an auth file as a directory of people.
func authDirectory(path string) (*people.Directory, error) {
	entries, err := httpapi.ReadAuthFile(path)
	if err != nil {
		return nil, err
	}
	return httpapi.AuthDirectory(entries, path)
}

// Start puts the --people file in the configuration bucket and follows
// it, and follows the auth file. It is a background service of the
// Service, which watches the bucket's directory itself.
func (s *peopleSetup) Start(ctx context.Context, kv people.ConfigKV) error {
	if s.file != "" {
		w := people.NewFileWatch(s.file, 0, func(ctx context.Context, b []byte) error {
			d, err := people.Parse(b, s.file)
			if err != nil {
				return err
			}
			rev, err := people.Put(ctx, kv, d)
			if err == nil {
				s.log.Info().Str("people", s.file).Uint64("revision", rev).Int("count", d.Len()).Msg("people: put the directory file in the configuration bucket")
			}
			return err
		}, s.log)
		if err := w.Start(ctx); err != nil {
			return err
		}
		s.watches = append(s.watches, w)
	}
	if s.auth != "" {
		w := people.NewFileWatch(s.auth, 0, func(_ context.Context, b []byte) error {
			d, err := httpapi.ParseAuthDirectory(b, s.auth)
			if err != nil {
				return err
			}
			m, err := people.Merge("the older files", d, s.slack)
			if err != nil {
				return err
			}
			return s.live.SetLocal(m)
		}, s.log)
		if err := w.Start(ctx); err != nil {
			_ = s.stopWatches(ctx)
			return err
		}
		s.watches = append(s.watches, w)
	}
	// The service follows the bucket's directory into s.live (see
	// interlock.Config.People), since before its workers started.
	if r := s.live.Refused(); r != nil {
		_ = s.Stop(ctx)
		return fmt.Errorf("the directory of people in the configuration bucket (revision %d) is refused: %w", r.Revision, r.Err)
	}
	s.sayInForce()
	return nil
}

// sayInForce logs which directory of people is in force, and from where:
// a directory put in the bucket by an earlier --people stays in force
// when the flag is dropped, and then says how to go back.
func (s *peopleSetup) sayInForce() {
	d := s.live.Current()
	ev := s.log.Info().Str("key", people.Key).Uint64("revision", s.live.Revision())
	switch {
	case d == nil:
		ev.Msg("people: no directory of people: every caller of the HTTP API and the inbox is the local user, holding every role, on loopback only")
	case s.file != "":
		ev.Str("people", s.file).Int("count", d.Len()).Msg("people: the directory in force is --people's file, put in the configuration bucket; callers need its tokens")
	case s.live.Revision() > 0:
		ev.Int("count", d.Len()).Msg("people: the directory in force is the configuration bucket's (put by an earlier --people, or nats kv put), though no --people was given; callers need its tokens. " +
			"To go back to the local user: interlock people clear, then restart serve")
	default:
		ev.Int("count", d.Len()).Msg("people: the directory in force is the older files' (--auth-file, the Slack configuration); callers need their tokens")
	}
}

// Stop stops following the files.
func (s *peopleSetup) Stop(ctx context.Context) error {
	return s.stopWatches(ctx)
}

func (s *peopleSetup) stopWatches(ctx context.Context) error {
	var errs []error
	for _, w := range s.watches {
		errs = append(errs, w.Stop(ctx))
	}
	s.watches = nil
	return errors.Join(errs...)
}

// peopleStartTimeout bounds reading the directory from the bucket at start.
const peopleStartTimeout = 30 * time.Second

// peopleService is a peopleSetup attached to a Service, on its
// configuration bucket.
type peopleService struct {
	*peopleSetup
	svc *interlock.Service
}

// Start binds the configuration bucket and starts the setup.
func (p peopleService) Start(ctx context.Context) error {
	// Started whatever the flags, the start is not cut short by a
	// Ctrl-C in the middle of serve's own: it is bounded instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), peopleStartTimeout)
	defer cancel()
	var kv jetstream.KeyValue
	err := bus.Ensure(ctx, "bucket "+p.svc.Names().ConfigBucket(), func(ctx context.Context) (err error) {
		kv, err = p.svc.JetStream().KeyValue(ctx, p.svc.Names().ConfigBucket())
		return err
	})
	if err != nil {
		return fmt.Errorf("binding bucket %s: %w", p.svc.Names().ConfigBucket(), err)
	}
	return p.peopleSetup.Start(ctx, kv)
}

// startPeople starts the directory of people on svc, stopped with it.
func startPeople(ctx context.Context, svc *interlock.Service, s *peopleSetup) error {
	return svc.Attach(ctx, peopleService{peopleSetup: s, svc: svc})
}

// peopleUsage says how to run the people commands.
const peopleUsage = "use: interlock people add <name> [--role ROLE ...] [--email A] [--slack U] [--teams UPN] [--token] --people FILE, interlock people list --people FILE, interlock people remove <name> --people FILE, interlock people rotate-token <name> --people FILE, interlock people import [--auth-file FILE] [--slack-config FILE], or interlock people clear"

// peopleCmd runs `interlock people add|list|remove|rotate-token|import|clear`.
func peopleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "clear" {
		return peopleClear(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("people", `people add <name> [--role ROLE ...] [--email ADDRESS] [--slack USER_ID] [--teams UPN] [--token] --people FILE
       interlock people list --people FILE
       interlock people remove <name> --people FILE
       interlock people rotate-token <name> --people FILE
       interlock people import [--auth-file FILE] [--slack-config FILE]
       interlock people clear [--data-dir DIR | --nats-url URL --creds FILE]`, stderr)
	var roles listFlag
	fs.Var(&roles, "role", "approver `role` the person holds (repeat for more); none lets them answer questions and choices only (people add)")
	file := fs.String("people", envOr("INTERLOCK_PEOPLE", ""), "the directory `file` (people add creates it, mode 0600, if it does not exist)")
	email := fs.String("email", "", "the person's e-mail `address` (people add)")
	slack := fs.String("slack", "", "the person's Slack `user id`, such as U012AB3CD (people add)")
	teams := fs.String("teams", "", "the person's Microsoft Teams account, their user principal name `upn` (people add)")
	token := fs.Bool("token", false, "give the person a bearer token for the HTTP API and the inbox, printed once (people add)")
	authFile := fs.String("auth-file", "", "an older auth `file` to import (people import)")
	slackFile := fs.String("slack-config", "", "a Slack bridge configuration `file` whose users and channels to import (people import)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) == 0 {
		return usageOf("people", peopleUsage)
	}
	sub, names := pos[0], pos[1:]
	addOnly := len(roles) > 0 || *email != "" || *slack != "" || *teams != "" || *token
	switch {
	case sub != "add" && sub != "list" && sub != "remove" && sub != "rotate-token" && sub != "import":
		return usageOf("people", "unknown people command %q; %s", sub, peopleUsage)
	case sub == "import":
		if len(names) != 0 || *file != "" || addOnly {
			return usageOf("people", "people import takes only --auth-file and --slack-config, and prints the directory: interlock people import --auth-file callers.yaml > people.yaml")
		}
		return peopleImport(*authFile, *slackFile, stdout)
	case *authFile != "" || *slackFile != "":
		return usageOf("people", "--auth-file and --slack-config are for people import")
	case sub == "list" && len(names) != 0:
		return usageOf("people", "people list takes no name, but was given %s: interlock people list --people FILE", quoteAll(names))
	case sub != "list" && len(names) != 1:
		return usageOf("people", "people %s takes one name, got %d", sub, len(names))
	case *file == "":
		return usageOf("people", "people %s needs --people FILE (or INTERLOCK_PEOPLE)", sub)
	case sub != "add" && addOnly:
		return usageOf("people", "--role, --email, --slack, --teams and --token are for people add; to change a person, edit the file (or remove and add them again)")
	}
	switch sub {
	case "list":
		return peopleList(*file, stdout)
	case "remove":
		if err := people.RemovePerson(*file, names[0]); err != nil {
			return plainPeopleError("people remove", err)
		}
		fmt.Fprintf(stdout, "Removed %s from %s. Their token stops working once serve reads the file again, about a second after the change.\n", names[0], *file)
		return nil
	case "rotate-token":
		tok, err := people.RotateToken(*file, names[0])
		if err != nil {
			return plainPeopleError("people rotate-token", err)
		}
		fmt.Fprintf(stderr, "Gave %s a new token in %s; the old one stops working once serve reads the file again. The token follows; it is shown only this once (the file keeps its SHA-256):\n", names[0], *file)
		fmt.Fprintln(stdout, tok)
		return nil
	}
	p := people.Person{Name: names[0], Roles: roles, Email: *email, Slack: *slack, Teams: *teams}
	if err := people.CheckName(p.Name); err != nil {
		return usageOf("people", "%v", err)
	}
	for _, r := range roles {
		if err := people.CheckRole(r); err != nil {
			return usageOf("people", "--role: %v", err)
		}
	}
	tok, err := people.AddPerson(*file, p, *token)
	if err != nil {
		return plainPeopleError("people add", err)
	}
	held := "no role"
	if len(roles) > 0 {
		held = "roles " + strings.Join(roles, ", ")
	}
	if !*token {
		fmt.Fprintf(stdout, "Added %s (%s) to %s.\n", p.Name, held, *file)
		return nil
	}
	fmt.Fprintf(stderr, "Added %s (%s) to %s. Their bearer token follows; it is shown only this once (the file keeps its SHA-256):\n", p.Name, held, *file)
	fmt.Fprintln(stdout, tok)
	return nil
}

// peopleList prints the people of a directory file: names, roles and
// handles, never a token or its hash.
func peopleList(file string, stdout io.Writer) error {
	d, err := people.ReadFile(file)
	if err != nil {
		return plainPeopleError("people list", err)
	}
	if d.Len() == 0 {
		fmt.Fprintf(stdout, "%s has nobody; add someone with: interlock people add NAME --role ROLE --token --people %s\n", file, file)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES\tTOKEN\tEMAIL\tSLACK\tTEAMS")
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, p := range d.People() {
		tok := "-"
		if p.TokenSHA256 != "" {
			tok = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, or(strings.Join(p.Roles, ", ")), tok, or(p.Email), or(p.Slack), or(p.Teams))
	}
	return tw.Flush()
}

// peopleImport prints the directory of an older auth file and a Slack
// configuration's users and channels.
func peopleImport(authFile, slackFile string, stdout io.Writer) error {
	if authFile == "" && slackFile == "" {
		return usageOf("people", "people import needs --auth-file FILE, --slack-config FILE, or both")
	}
	var auth, slack *people.Directory
	var err error
	if authFile != "" {
		if auth, err = authDirectory(authFile); err != nil {
			return plainAuthError("people import", err)
		}
	}
	if slackFile != "" {
		if slack, err = slackbridge.ReadDirectory(slackFile); err != nil {
			return fmt.Errorf("people import: %w", stripped{err, strings.TrimPrefix(err.Error(), "slackbridge: ")})
		}
	}
	d, err := people.Merge("the imported directory", auth, slack)
	if err != nil {
		return plainPeopleError("people import", err)
	}
	fmt.Fprintf(stdout, "# Interlock's directory of people (interlock serve --people FILE),\n# imported from %s.\n", strings.Join(nonEmpty(authFile, slackFile), " and "))
	_, err = stdout.Write(d.Source())
	return err
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// plainPeopleError is an error of the directory, said for the command
// line.
func plainPeopleError(cmd string, err error) error {
	return fmt.Errorf("%s: %w", cmd, stripped{err, strings.TrimPrefix(err.Error(), "people: ")})
}
