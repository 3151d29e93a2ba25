package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
	url, creds, prefix, source string
	json                       bool
	wait                       time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", envOr("INTERLOCK_NATS_URL", wire.DefaultURL), "NATS server `url`")
	fs.StringVar(&c.creds, "creds", envOr("INTERLOCK_CREDS", ""), "NATS credentials `file`")
	fs.StringVar(&c.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	fs.StringVar(&c.source, "source", envOr("INTERLOCK_SOURCE", "/cli"), "CloudEvents `source` naming you in the audit stream")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
	fs.DurationVar(&c.wait, "wait", client.DefaultWait, "how long to wait for the outcome")
}

func (c *clientFlags) dial(ctx context.Context) (*client.Client, func(), error) {
	names, err := wire.NewNames(c.prefix)
	if err != nil {
		return nil, nil, usageError{err.Error()}
	}
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: c.url, CredsFile: c.creds, Name: "interlock-cli"})
	if err != nil {
		return nil, nil, err
	}
	return client.New(nc, js, names, c.source, c.wait), nc.Close, nil
}

// clientCommand parses a client command's flags and at least npos
// positional arguments; check, if set, validates them before any
// connection is made. It then connects, and returns the client and a
// function that closes the connection.
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
	if len(pos) < npos {
		fs.Usage()
		return nil, nil, nil, nil, usagef("%s needs %d arguments: %s", name, npos, synopsis)
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
		fs.StringVar(&key, "idempotency-key", "", "`key` so a repeat of this answer has its effect once")
		fs.Int64Var(&expect, "expect-checkpoint", -1, "refuse unless the run is at checkpoint `n`")
	}, func(pos []string) error {
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
			return usagef("nothing to send: give field=value answers or --select ID")
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	flow, run := pos[0], pos[1]
	if token == "" {
		in, err := c.LastInterrupt(ctx, flow, run)
		if err != nil {
			return err
		}
		r.ResumeToken, r.RequestID = in.ResumeToken, in.RequestID
	}
	ev, err := c.Resume(ctx, flow, run, r)
	if err != nil {
		return err
	}
	return printOutcome(stdout, stderr, cf.json, flow, ev)
}

func cancelCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var reason string
	cf, c, pos, closeFn, err := clientCommand(ctx, "cancel", "cancel <flow> <run> [--reason TEXT]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why, for the audit record")
	}, nil)
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
	cf, c, pos, closeFn, err := clientCommand(ctx, "show", "show <flow> <run>", stderr, args, 2, nil, nil)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	cp, rev, err := c.Checkpoint(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if cf.json {
		var doc map[string]any
		b, _ := json.Marshal(cp)
		_ = json.Unmarshal(b, &doc)
		doc["checkpoint"] = rev
		return writeJSON(stdout, doc)
	}
	fmt.Fprintf(stdout, "run %s of flow %s: %s at node %s (checkpoint %d)\n", cp.Run, cp.Flow, cp.Status, cp.Node, rev)
	fmt.Fprintf(stdout, "created %s, updated %s\n", cp.CreatedAt.Local().Format(time.DateTime), cp.UpdatedAt.Local().Format(time.DateTime))
	if cp.Error != "" {
		fmt.Fprintf(stdout, "error: %s\n", cp.Error)
	}
	if in := cp.Interrupt; in != nil {
		fmt.Fprintf(stdout, "waiting on %s interrupt %s\n", in.Kind, in.RequestID)
		for _, q := range in.Questions {
			fmt.Fprintf(stdout, "  ? %s  (%s)\n", q.Question, q.Field)
		}
		if in.Kind == engine.KindChoice {
			fmt.Fprintf(stdout, "  ? %s\n", in.Question)
		}
	}
	fmt.Fprintln(stdout, "state:")
	b, _ := json.MarshalIndent(cp.State, "  ", "  ")
	fmt.Fprintf(stdout, "  %s\n", b)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printOutcome prints the event that settled a command. Refused and failed
// outcomes are errors.
func printOutcome(stdout, stderr io.Writer, asJSON bool, flow string, ev client.Event) error {
	if asJSON {
		var v any
		b, _ := json.Marshal(ev.Event)
		_ = json.Unmarshal(b, &v)
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
		if ev.Kind == "refused" || ev.Kind == "failed" {
			return errReported
		}
		return nil
	}
	run := ev.Event.Subject()
	switch ev.Kind {
	case "interrupted":
		var in events.Interrupted
		if err := ev.Decode(&in); err != nil {
			return err
		}
		printInterrupt(stdout, flow, in)
	case "completed":
		var done events.Completed
		if err := ev.Decode(&done); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(done.State, "  ", "  ")
		fmt.Fprintf(stdout, "run %s of %s completed (checkpoint %d) with state:\n  %s\n", run, flow, done.Checkpoint, b)
	case "failed":
		var f events.Failed
		_ = ev.Decode(&f)
		fmt.Fprintf(stderr, "run %s of %s failed at node %s: %s\n", run, flow, f.Node, f.Error)
		return errReported
	case "refused":
		var ref events.Refused
		_ = ev.Decode(&ref)
		fmt.Fprintf(stderr, "refused (%s): %s\n", ref.Code, ref.Message)
		return errReported
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
		example = append(example, "--select "+in.Options[0].ID)
	}
	fmt.Fprintf(w, "answer with:\n  interlock answer %s %s %s\n", flow, in.Run, strings.Join(example, " "))
}
