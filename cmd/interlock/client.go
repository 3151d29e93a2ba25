package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	url, creds, natsContext, prefix, source string
	json                                    bool
	wait                                    time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", "", "NATS server `url` (default: $INTERLOCK_NATS_URL, else $NATS_URL, else the --context's, else "+wire.DefaultURL+")")
	fs.StringVar(&c.creds, "creds", envOr("NATS_CREDS", ""), "NATS credentials `file` (default: $NATS_CREDS, else the --context's)")
	fs.StringVar(&c.natsContext, "context", envOr("NATS_CONTEXT", ""), "natscli context `name` (~/.config/nats/context/NAME.json) or file giving url, creds, user, password and TLS files")
	fs.StringVar(&c.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	fs.StringVar(&c.source, "source", envOr("INTERLOCK_SOURCE", "/cli"), "CloudEvents `source` naming you in the audit stream")
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
	return client.New(nc, js, names, c.source, c.wait), nc.Close, nil
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
	case "show", "cancel", "reannounce":
		if len(pos) < 2 {
			return usageOf(name, "%s needs a flow and a run: interlock %s <flow> <run>", name, name)
		}
		if len(pos) > 2 {
			return usageOf(name, "%s takes a flow and a run, but was also given %s: interlock %s <flow> <run>", name, quoteAll(pos[2:]), name)
		}
	case "pending":
		if len(pos) > 0 {
			return usageOf(name, "pending takes no arguments, but was given %s; to list one flow's runs: interlock pending --flow %s", quoteAll(pos), pos[0])
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

// assignments parses field=value (a string) and field:=JSON arguments.
func assignments(args []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, ":="); ok && k != "" && !strings.Contains(k, "=") {
			if !json.Valid([]byte(v)) {
				return nil, usagef("%s: the value after := must be JSON (use field=value for a string)", a)
			}
			out[k] = json.RawMessage(v)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usagef("argument %q is not field=value or field:=JSON", a)
		}
		b, _ := json.Marshal(v)
		out[k] = b
	}
	return out, nil
}

func startCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var run, state, origin string
	st := map[string]json.RawMessage{}
	cf, c, pos, closeFn, err := clientCommand(ctx, "start", "start <flow> [field=value ...] [--run ID] [--state JSON]", stderr, args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&run, "run", "", "run `id` (default: a fresh one)")
		fs.StringVar(&state, "state", "", "initial state as a JSON `object`; field=value arguments are added to it")
		fs.StringVar(&origin, "origin", "", "JSON `object` echoed in every event of the run")
	}, func(pos []string) error {
		if state != "" {
			if err := json.Unmarshal([]byte(state), &st); err != nil {
				return usagef("--state must be a JSON object: %v", err)
			}
		}
		more, err := assignments(pos[1:])
		if err != nil {
			return err
		}
		for k, v := range more {
			st[k] = v
		}
		if origin != "" && !json.Valid([]byte(origin)) {
			return usagef("--origin must be a JSON object")
		}
		if err := checkName("flow", pos[0]); err != nil {
			return err
		}
		if run != "" {
			if err := checkName("run", run); err != nil {
				return usageError{msg: "--run: " + err.Error()}
			}
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	ev, err := c.Start(ctx, pos[0], run, st, json.RawMessage(origin))
	if err != nil {
		return err
	}
	return printOutcome(stdout, stderr, cf.json, pos[0], ev)
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
	if err := client.CheckName(what, name); err != nil {
		return usageError{msg: strings.TrimPrefix(err.Error(), "client: ")}
	}
	return nil
}

func answerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		selected            listFlag
		answersJSON, update string
		approver, reason    string
		token, key          string
		expect              int64
		r                   events.Resume
	)
	cf, c, pos, closeFn, err := clientCommand(ctx, "answer", "answer <flow> <run> [field=value ...] [--select ID ...]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.Var(&selected, "select", "option `id` to choose (repeat for several)")
		fs.StringVar(&answersJSON, "answers", "", "answers as a JSON `object`")
		fs.StringVar(&update, "update", "", "state update as a JSON `object`, merged through the flow's reducers")
		fs.StringVar(&approver, "approver", "", "`name` of who answers, for the audit record")
		fs.StringVar(&reason, "reason", "", "`reason` for the audit record")
		fs.StringVar(&token, "token", "", "resume `token` (default: read from the run's last interrupted event)")
		fs.StringVar(&key, "idempotency-key", "", "`key` so a repeat of this answer has its effect once; a repeat reports \"already applied\" and the run as it stands")
		fs.Int64Var(&expect, "expect-checkpoint", -1, "refuse unless the run is at checkpoint `n`")
	}, func(pos []string) error {
		if err := checkFlowRun(pos); err != nil {
			return err
		}
		r = events.Resume{Selected: selected, Approver: approver, Reason: reason, IdempotencyKey: key, ResumeToken: token}
		answers, err := assignments(pos[2:])
		if err != nil {
			return err
		}
		if answersJSON != "" {
			if err := json.Unmarshal([]byte(answersJSON), &r.Answers); err != nil {
				return usagef("--answers must be a JSON object: %v", err)
			}
		}
		if len(answers) > 0 && r.Answers == nil {
			r.Answers = map[string]json.RawMessage{}
		}
		for k, v := range answers {
			r.Answers[k] = v
		}
		if update != "" {
			if err := json.Unmarshal([]byte(update), &r.Update); err != nil {
				return usagef("--update must be a JSON object: %v", err)
			}
		}
		if expect >= 0 {
			n := uint64(expect)
			r.ExpectedCheckpoint = &n
		}
		if len(r.Answers) == 0 && len(r.Selected) == 0 && len(r.Update) == 0 {
			return usageOf("answer", "nothing to send: give field=value answers or --select ID: interlock answer %s %s field=value ...", pos[0], pos[1])
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	flow, run := pos[0], pos[1]
	cp, err := c.Checkpoint(ctx, flow, run)
	if err != nil {
		return err
	}
	repeat := key != "" && cp.HasApplied(key)
	if !cp.Waiting() && !repeat {
		return &exitError{code: exitRefused, err: fmt.Errorf("run %s of flow %s is %s, not waiting for an answer; `interlock show %s %s` shows it", run, flow, cp.Status, flow, run)}
	}
	if token == "" {
		in, err := c.LastInterrupt(ctx, flow, run)
		if err != nil && !repeat {
			return err
		}
		r.ResumeToken, r.RequestID = in.ResumeToken, in.RequestID
	}
	ev, err := c.Resume(ctx, flow, run, r)
	if err != nil {
		return err
	}
	if ev.Repeat {
		return printRepeat(stdout, cf.json, key, ev.Current)
	}
	if err := printOutcome(stdout, stderr, cf.json, flow, ev); err != nil {
		return err
	}
	if cp.Interrupt != nil && reasked(*cp.Interrupt, ev) {
		return reported(exitReasked)
	}
	return nil
}

// reasked reports whether ev asks again what the interrupt prev asked: an
// interrupt of the same kind at the same node asking only fields prev
// asked (a validator rejected an answer, or fields are still missing), or
// the same choice.
func reasked(prev events.CheckpointInterrupt, ev client.Event) bool {
	if ev.Kind != events.KindInterrupted {
		return false
	}
	var in events.Interrupted
	if ev.Decode(&in) != nil || in.Node != prev.Node || in.Kind != prev.Kind {
		return false
	}
	if len(in.Questions) == 0 {
		return in.Question == prev.Question
	}
	asked := map[string]bool{}
	for _, q := range prev.Questions {
		asked[q.Field] = true
	}
	for _, f := range prev.Fields {
		asked[f] = true
	}
	for _, q := range in.Questions {
		if !asked[q.Field] {
			return false
		}
	}
	return true
}

// printRepeat reports an answer Interlock had already applied, and the run
// as it stands.
func printRepeat(stdout io.Writer, asJSON bool, key string, cp *events.Checkpoint) error {
	if asJSON {
		return writeJSON(stdout, map[string]any{"alreadyApplied": true, "idempotencyKey": key, "run": cp})
	}
	fmt.Fprintf(stdout, "already applied: an answer with idempotency key %q was applied before; this one changed nothing\n", key)
	printCheckpoint(stdout, *cp)
	return nil
}

func cancelCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var reason string
	cf, c, pos, closeFn, err := clientCommand(ctx, "cancel", "cancel <flow> <run> [--reason TEXT]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why, for the audit record")
	}, checkFlowRun)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	ev, err := c.Cancel(ctx, pos[0], pos[1], reason)
	if err != nil {
		return err
	}
	return printOutcome(stdout, stderr, cf.json, pos[0], ev)
}

func reannounceCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var reason string
	cf, c, pos, closeFn, err := clientCommand(ctx, "reannounce", "reannounce <flow> <run> [--reason TEXT]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why, for the audit record")
	}, checkFlowRun)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	ev, err := c.Reannounce(ctx, pos[0], pos[1], reason)
	if err != nil {
		return err
	}
	return printOutcome(stdout, stderr, cf.json, pos[0], ev)
}

func pendingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var q client.PendingQuery
	cf, c, _, closeFn, err := clientCommand(ctx, "pending", "pending [--flow NAME] [--limit N] [--after CURSOR]", stderr, args, 0, func(fs *flag.FlagSet) {
		fs.StringVar(&q.Flow, "flow", "", "only runs of this `flow`")
		fs.IntVar(&q.Limit, "limit", client.DefaultPendingLimit, "show at most `n` runs, oldest first")
		fs.StringVar(&q.After, "after", "", "show the page after this `cursor` (printed with the previous page)")
	}, func([]string) error {
		if q.Limit < 1 || q.Limit > client.MaxPendingLimit {
			return usagef("--limit %d: use 1 to %d", q.Limit, client.MaxPendingLimit)
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	page, err := c.ListPending(ctx, q)
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSON(stdout, page)
	}
	if len(page.Items) == 0 {
		if q.After != "" {
			fmt.Fprintln(stdout, "No more runs are waiting.")
		} else {
			fmt.Fprintln(stdout, "No runs are waiting.")
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tRUN\tNODE\tKIND\tWAITING FOR\tCHECKPOINT\tASKED")
	for _, p := range page.Items {
		what := strings.Join(p.Fields, ", ")
		if p.Kind == engine.KindChoice {
			what = p.Question
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Flow, p.Run, p.Node, p.Kind, what, p.Checkpoint, p.AskedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d shown, %d waiting in all.\n", len(page.Items), page.Total)
	if page.Next != "" {
		next := "interlock pending"
		if q.Flow != "" {
			next += " --flow " + q.Flow
		}
		if q.Limit != client.DefaultPendingLimit {
			next += " --limit " + strconv.Itoa(q.Limit)
		}
		fmt.Fprintf(stdout, "Next page: %s --after %s\n", next, page.Next)
	}
	return nil
}

func showCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cf, c, pos, closeFn, err := clientCommand(ctx, "show", "show <flow> <run>", stderr, args, 2, nil, checkFlowRun)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	cp, err := c.Checkpoint(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSON(stdout, cp)
	}
	printCheckpoint(stdout, cp)
	return nil
}

func printCheckpoint(w io.Writer, cp events.Checkpoint) {
	fmt.Fprintf(w, "run %s of flow %s: %s at node %s (checkpoint %d)\n", cp.Run, cp.Flow, cp.Status, cp.Node, cp.Checkpoint)
	fmt.Fprintf(w, "created %s, updated %s\n", cp.CreatedAt.Local().Format(time.DateTime), cp.UpdatedAt.Local().Format(time.DateTime))
	if cp.Error != "" {
		fmt.Fprintf(w, "error: %s\n", cp.Error)
	}
	if in := cp.Interrupt; in != nil {
		fmt.Fprintf(w, "waiting on %s interrupt %s\n", in.Kind, in.RequestID)
		for _, q := range in.Questions {
			fmt.Fprintf(w, "  ? %s  (%s)\n", q.Question, q.Field)
		}
		if in.Kind == engine.KindChoice {
			fmt.Fprintf(w, "  ? %s\n", in.Question)
		}
	}
	fmt.Fprintln(w, "state:")
	var state any
	_ = json.Unmarshal(cp.State, &state)
	b, _ := json.MarshalIndent(state, "  ", "  ")
	fmt.Fprintf(w, "  %s\n", b)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printOutcome prints the event that settled a command. A refused outcome
// is an error with exit code 3, a failed one with exit code 1; both are
// printed here, on stdout as JSON with --json, else on stderr.
func printOutcome(stdout, stderr io.Writer, asJSON bool, flow string, ev client.Event) error {
	if asJSON {
		var v any
		b, _ := json.Marshal(ev.Event)
		_ = json.Unmarshal(b, &v)
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
		switch ev.Kind {
		case events.KindRefused:
			return reported(exitRefused)
		case events.KindFailed:
			return reported(exitFailed)
		}
		return nil
	}
	run := ev.Event.Subject()
	switch ev.Kind {
	case events.KindInterrupted:
		var in events.Interrupted
		if err := ev.Decode(&in); err != nil {
			return err
		}
		printInterrupt(stdout, flow, in)
	case events.KindCompleted:
		var done events.Completed
		if err := ev.Decode(&done); err != nil {
			return err
		}
		var state any
		_ = json.Unmarshal(done.State, &state)
		b, _ := json.MarshalIndent(state, "  ", "  ")
		fmt.Fprintf(stdout, "run %s of %s completed (checkpoint %d) with state:\n  %s\n", run, flow, done.Checkpoint, b)
	case events.KindFailed:
		var f events.Failed
		_ = ev.Decode(&f)
		fmt.Fprintf(stderr, "run %s of %s failed at node %s: %s\n", run, flow, f.Node, f.Error)
		return reported(exitFailed)
	case events.KindRefused:
		var ref events.Refused
		_ = ev.Decode(&ref)
		fmt.Fprintf(stderr, "refused (%s): %s\n", ref.Code, ref.Message)
		return reported(exitRefused)
	default:
		fmt.Fprintf(stdout, "run %s of %s: %s\n", run, flow, ev.Kind)
	}
	return nil
}

func printInterrupt(w io.Writer, flow string, in events.Interrupted) {
	fmt.Fprintf(w, "run %s of %s is waiting at %s (checkpoint %d)\n", in.Run, flow, in.Node, in.Checkpoint)
	if in.Context != "" {
		fmt.Fprintf(w, "  context: %s\n", in.Context)
	}
	var example []string
	for _, q := range in.Questions {
		fmt.Fprintf(w, "  ? %s  (%s)\n", q.Question, q.Field)
		if len(q.Suggestions) > 0 {
			fmt.Fprintf(w, "      suggestions: %s\n", strings.Join(q.Suggestions, ", "))
		}
		if q.Context != "" {
			fmt.Fprintf(w, "      context: %s\n", q.Context)
		}
		example = append(example, q.Field+"=...")
	}
	if in.Kind == engine.KindChoice {
		how := "choose one"
		if in.Multiple {
			how = "choose one or more"
		}
		fmt.Fprintf(w, "  ? %s  (%s)\n", in.Question, how)
		for _, o := range in.Options {
			fmt.Fprintf(w, "      %-14s %s\n", o.ID, o.Label)
		}
		if len(in.Options) > 0 {
			example = append(example, "--select "+in.Options[0].ID)
		}
	}
	fmt.Fprintf(w, "answer with:\n  interlock answer %s %s %s\n", flow, in.Run, strings.Join(example, " "))
}
