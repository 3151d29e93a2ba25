package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
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
	url, creds, natsContext, prefix, source, inbox string
	json                                           bool
	wait                                           time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", "", "NATS server `url` (default: $INTERLOCK_NATS_URL, else $NATS_URL, else the --context's, else "+wire.DefaultURL+")")
	fs.StringVar(&c.creds, "creds", envOr("NATS_CREDS", ""), "NATS credentials `file` (default: $NATS_CREDS, else the --context's)")
	fs.StringVar(&c.natsContext, "context", envOr("NATS_CONTEXT", ""), "natscli context `name` (~/.config/nats/context/NAME.json) or file giving url, creds, user, password and TLS files")
	fs.StringVar(&c.prefix, "prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of streams, subjects and buckets")
	fs.StringVar(&c.inbox, "inbox-prefix", envOr("NATS_INBOX_PREFIX", ""), "`prefix` of the connection's reply subjects, such as _INBOX_bot for user bot of deploy/interlock-auth.conf (default: $NATS_INBOX_PREFIX, else the --context's, else _INBOX)")
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

// jsonAssignment splits a field:=JSON argument; ok is false for any other.
func jsonAssignment(a string) (field, value string, ok bool) {
	k, v, ok := strings.Cut(a, ":=")
	if !ok || k == "" || strings.Contains(k, "=") {
		return "", "", false
	}
	return k, v, true
}

// assignments parses field=value (a string) and field:=JSON arguments.
func assignments(args []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, a := range args {
		if k, v, ok := jsonAssignment(a); ok {
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

// answerSynopsis is the usage line of answer: answers to a question or
// choice, or a decision on an approval.
const answerSynopsis = `answer <flow> <run> [field=value ...] [--select ID ...]
       interlock answer <flow> <run> --approve | --reject | --edit field=value ... [--reason TEXT] [--approver NAME]`

func answerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		selected, edits     listFlag
		approve, reject     bool
		answersJSON, update string
		approver, reason    string
		token, key, role    string
		expect              int64
		r                   events.Resume
	)
	cf, c, pos, closeFn, err := clientCommand(ctx, "answer", answerSynopsis, stderr, args, 2, func(fs *flag.FlagSet) {
		fs.Var(&selected, "select", "option `id` to choose (repeat for several)")
		fs.StringVar(&answersJSON, "answers", "", "answers as a JSON `object`")
		fs.BoolVar(&approve, "approve", false, "approve the pending approval: its action runs with the proposed args")
		fs.BoolVar(&reject, "reject", false, "reject the pending approval: its action never runs (give --reason to say why)")
		fs.Var(&edits, "edit", "approve with the arg changed: `field=value` (JSON if it parses, else a string; a string when the proposed arg is one) or field:=JSON; repeat for several")
		fs.StringVar(&update, "update", "", "state update as a JSON `object`, merged through the flow's reducers")
		fs.StringVar(&approver, "approver", "", "`name` of who answers or decides, for the audit record")
		fs.StringVar(&role, "role", "", "decide as approver `role`: send on <prefix>.in.<flow>.resume.<role>, which NATS permissions may require (with authorization configured, approvals are decided only that way)")
		fs.StringVar(&reason, "reason", "", "`reason` for the audit record (a rejection's reason is kept in the run's state)")
		fs.StringVar(&token, "token", "", "resume `token` (default: read from the run's last interrupted event)")
		fs.StringVar(&key, "idempotency-key", "", "`key` so a repeat of this answer has its effect once; a repeat reports \"already applied\" and the run as it stands")
		fs.Int64Var(&expect, "expect-checkpoint", -1, "refuse unless the run is at checkpoint `n`")
	}, func(pos []string) error {
		if err := checkFlowRun(pos); err != nil {
			return err
		}
		r = events.Resume{Selected: selected, Approver: approver, Reason: reason, IdempotencyKey: key, ResumeToken: token}
		var err error
		if r.Decision, err = decisionOf(approve, reject, edits); err != nil {
			return err
		}
		if r.Decision != "" {
			if len(pos) > 2 || answersJSON != "" || len(selected) > 0 {
				return usageOf("answer", "--%s decides an approval, while field=value answers, --answers and --select answer a question or choice: give one or the other", r.Decision)
			}
			if _, err := editValues(edits, nil); err != nil {
				return err
			}
		}
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
		if len(r.Answers) == 0 && len(r.Selected) == 0 && len(r.Update) == 0 && r.Decision == "" {
			return usageOf("answer", "nothing to send: give field=value answers or --select ID, or decide an approval with --approve, --reject or --edit field=value: interlock answer %s %s field=value ...", pos[0], pos[1])
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
	var proposed json.RawMessage
	if in := cp.Interrupt; in != nil && cp.Waiting() {
		if !repeat {
			if err := fitsInterrupt(flow, run, *in, r); err != nil {
				return err
			}
		}
		if in.Kind == engine.KindApproval {
			proposed = in.Args
		}
	}
	if len(edits) > 0 {
		if r.Edits, err = editValues(edits, proposed); err != nil {
			return err
		}
	}
	if token == "" {
		in, err := c.LastInterrupt(ctx, flow, run)
		if err != nil && !repeat {
			return err
		}
		if err == nil && !repeat && r.Decision != "" && len(in.Decisions) > 0 && !slices.Contains(in.Decisions, r.Decision) {
			return usageOf("answer", "the approval of %s on run %s of flow %s allows only %s, not %s", in.Action, run, flow, strings.Join(in.Decisions, ", "), r.Decision)
		}
		r.ResumeToken, r.RequestID = in.ResumeToken, in.RequestID
	}
	var ev client.Event
	if role != "" {
		ev, err = c.ResumeWithRole(ctx, flow, run, role, r)
	} else {
		ev, err = c.Resume(ctx, flow, run, r)
	}
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

// decisionOf returns the decision the flags of answer give: "" for none,
// or a usage error when more than one is given.
func decisionOf(approve, reject bool, edits []string) (string, error) {
	var given []string
	if approve {
		given = append(given, "--approve")
	}
	if reject {
		given = append(given, "--reject")
	}
	if len(edits) > 0 {
		given = append(given, "--edit")
	}
	switch len(given) {
	case 0:
		return "", nil
	case 1:
		return map[string]string{"--approve": "approve", "--reject": "reject", "--edit": "edit"}[given[0]], nil
	}
	return "", usageOf("answer", "give one decision, not %s: --approve, --reject or --edit field=value (repeat --edit to change several args)", strings.Join(given, " and "))
}

// fitsInterrupt checks that what answer sends fits the kind of interrupt
// the run waits on, and says what the interrupt wants when it does not.
func fitsInterrupt(flow, run string, in events.CheckpointInterrupt, r events.Resume) error {
	switch {
	case in.Kind == engine.KindApproval && r.Decision == "":
		args := ""
		if keys := argNames(in.Args); len(keys) > 0 {
			args = " (args: " + strings.Join(keys, ", ") + ")"
		}
		role := ""
		if in.ApproverRole != "" {
			role = " for role " + in.ApproverRole
		}
		return usageOf("answer", "run %s of flow %s waits on an approval of %s%s, not on answers: decide with --approve, --reject [--reason TEXT] or --edit field=value%s",
			run, flow, in.Action, role, args)
	case in.Kind != engine.KindApproval && r.Decision != "":
		var how string
		switch in.Kind {
		case engine.KindChoice:
			var ids []string
			for _, o := range in.Options {
				ids = append(ids, o.ID)
			}
			how = fmt.Sprintf("a choice (%s): answer it with interlock answer %s %s --select ID (options: %s)", in.Question, flow, run, strings.Join(ids, ", "))
		default:
			var ask []string
			for _, q := range in.Questions {
				ask = append(ask, q.Field+"=...")
			}
			how = fmt.Sprintf("a %s: answer it with interlock answer %s %s %s", in.Kind, flow, run, strings.Join(ask, " "))
		}
		return usageOf("answer", "--%s decides an approval, but run %s of flow %s waits on %s", r.Decision, run, flow, how)
	}
	return nil
}

// editValues turns --edit arguments into the edits of a decision. A
// field:=JSON value is sent as is; a field=value value is sent as a string
// when the proposed arg is a string (or the value is not JSON), else as
// the JSON it spells, so that amount=400 edits a number.
func editValues(args []string, proposed json.RawMessage) (map[string]json.RawMessage, error) {
	var current map[string]json.RawMessage
	_ = json.Unmarshal(proposed, &current)
	out := map[string]json.RawMessage{}
	for _, a := range args {
		if k, v, ok := jsonAssignment(a); ok {
			if !json.Valid([]byte(v)) {
				return nil, usageOf("answer", "--edit %s: the value after := must be JSON (use field=value for a string)", a)
			}
			out[k] = json.RawMessage(v)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usageOf("answer", "--edit %q is not field=value or field:=JSON", a)
		}
		was := bytes.TrimSpace(current[k])
		if json.Valid([]byte(v)) && (len(was) == 0 || was[0] != '"') {
			out[k] = json.RawMessage(v)
			continue
		}
		b, _ := json.Marshal(v)
		out[k] = b
	}
	return out, nil
}

// argNames returns the names of an approval's args, sorted.
func argNames(args json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// reasked reports whether ev asks again what the interrupt prev asked: an
// interrupt of the same kind at the same node asking only fields prev
// asked (a validator rejected an answer, or fields are still missing), the
// same choice, or the same approval with an error (its edit was refused).
func reasked(prev events.CheckpointInterrupt, ev client.Event) bool {
	if ev.Kind != events.KindInterrupted {
		return false
	}
	var in events.Interrupted
	if ev.Decode(&in) != nil || in.Node != prev.Node || in.Kind != prev.Kind {
		return false
	}
	if in.Kind == engine.KindApproval {
		// An approval is asked again only when its edit was refused.
		return in.Action == prev.Action && in.Error != ""
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
	var (
		q            client.PendingQuery
		kinds, roles listFlag
	)
	cf, c, _, closeFn, err := clientCommand(ctx, "pending", "pending [--flow NAME] [--kind KIND] [--role ROLE] [--newest] [--limit N] [--after CURSOR]", stderr, args, 0, func(fs *flag.FlagSet) {
		fs.StringVar(&q.Flow, "flow", "", "only runs of this `flow`")
		fs.Var(&kinds, "kind", "only interrupts of this `kind`: question, choice or approval (repeat for more)")
		fs.Var(&roles, "role", "only approvals for this approver `role` (repeat for more)")
		fs.BoolVar(&q.Newest, "newest", false, "the most recently asked first (the default is oldest first)")
		fs.IntVar(&q.Limit, "limit", client.DefaultPendingLimit, "show at most `n` runs")
		fs.StringVar(&q.After, "after", "", "show the page after this `cursor` (printed with the previous page)")
	}, func([]string) error {
		q.Kinds, q.Roles = kinds, roles
		for _, k := range kinds {
			if k != engine.KindQuestion && k != engine.KindChoice && k != engine.KindApproval {
				return usagef("--kind %q: use question, choice or approval", k)
			}
		}
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
		switch p.Kind {
		case engine.KindChoice:
			what = p.Question
		case engine.KindApproval:
			what = "approval of " + p.Action
			if p.ApproverRole != "" {
				what += " by " + p.ApproverRole
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Flow, p.Run, p.Node, p.Kind, what, p.Checkpoint, p.AskedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if q.Kinds == nil && q.Roles == nil {
		fmt.Fprintf(stdout, "%d shown, %d waiting in all.\n", len(page.Items), page.Total)
	} else {
		fmt.Fprintf(stdout, "%d shown, of %d waiting before the kind and role filters.\n", len(page.Items), page.Total)
	}
	if page.Next != "" {
		next := "interlock pending"
		if q.Flow != "" {
			next += " --flow " + q.Flow
		}
		for _, k := range q.Kinds {
			next += " --kind " + k
		}
		for _, r := range q.Roles {
			next += " --role " + r
		}
		if q.Newest {
			next += " --newest"
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
		if in.Kind == engine.KindApproval {
			printApproval(w, approvalView{action: in.Action, args: in.Args, reason: in.Reason, role: in.ApproverRole, expiresAt: in.ExpiresAt}, time.Now())
		} else if in.ExpiresAt != nil {
			fmt.Fprintf(w, "  deadline: %s\n", deadline(*in.ExpiresAt, time.Now()))
		}
	}
	printDecisions(w, cp.Decisions)
	fmt.Fprintln(w, "state:")
	var state any
	_ = json.Unmarshal(cp.State, &state)
	b, _ := json.MarshalIndent(state, "  ", "  ")
	fmt.Fprintf(w, "  %s\n", b)
}

// approvalView is what is shown of an approval interrupt.
type approvalView struct {
	action, reason, role, gate, err string
	args                            json.RawMessage
	decisions                       []string
	expiresAt                       *time.Time
}

// printApproval shows an approval: the proposed action and its args, why,
// who decides, what may be decided, and by when.
func printApproval(w io.Writer, a approvalView, now time.Time) {
	fmt.Fprintf(w, "  approval of %s", a.action)
	if a.role != "" {
		fmt.Fprintf(w, ", for role %s", a.role)
	}
	if a.gate != "" {
		fmt.Fprintf(w, " (gate %s the node)", a.gate)
	}
	fmt.Fprintln(w)
	if a.reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", a.reason)
	}
	fmt.Fprintf(w, "  args: %s\n", indentJSON(a.args, "  "))
	if len(a.decisions) > 0 {
		fmt.Fprintf(w, "  decisions: %s\n", strings.Join(a.decisions, ", "))
	}
	if a.expiresAt != nil {
		fmt.Fprintf(w, "  deadline: %s\n", deadline(*a.expiresAt, now))
	}
	if a.err != "" {
		fmt.Fprintf(w, "  error: %s\n", a.err)
	}
}

// deadline shows a deadline in local time with the time left.
func deadline(at, now time.Time) string {
	left := at.Sub(now).Round(time.Second)
	if left < 0 {
		return fmt.Sprintf("%s (passed %s ago)", at.Local().Format(time.DateTime), -left)
	}
	return fmt.Sprintf("%s (%s left)", at.Local().Format(time.DateTime), left)
}

// indentJSON pretty-prints a JSON value, each line after the first
// starting with prefix.
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, prefix, "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// compactJSON prints a JSON value on one line.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// printDecisions shows the approval decisions a checkpoint holds.
func printDecisions(w io.Writer, raw json.RawMessage) {
	var ds []struct {
		Verdict  string          `json:"verdict"`
		Action   string          `json:"action"`
		Args     json.RawMessage `json:"args"`
		Approver string          `json:"approver"`
		Reason   string          `json:"reason"`
		At       time.Time       `json:"at"`
	}
	if json.Unmarshal(raw, &ds) != nil || len(ds) == 0 {
		return
	}
	fmt.Fprintln(w, "decisions:")
	for _, d := range ds {
		fmt.Fprintf(w, "  %s  %s %s by %s, args %s", d.At.Local().Format(time.DateTime), d.Verdict, d.Action, d.Approver, compactJSON(d.Args))
		if d.Reason != "" {
			fmt.Fprintf(w, "; reason: %s", d.Reason)
		}
		fmt.Fprintln(w)
	}
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
	if in.Kind == engine.KindApproval {
		a := approvalView{action: in.Action, args: in.Args, reason: in.Reason, role: in.ApproverRole, gate: in.Gate, err: in.Error, decisions: in.Decisions}
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err == nil {
			a.expiresAt = &t
		}
		printApproval(w, a, time.Now())
		if err != nil && in.ExpiresAt != "" {
			fmt.Fprintf(w, "  deadline: %s\n", in.ExpiresAt)
		}
		decide := map[string]string{"approve": "--approve", "reject": "--reject --reason TEXT", "edit": "--edit FIELD=VALUE"}
		if keys := argNames(in.Args); len(keys) > 0 {
			decide["edit"] = "--edit " + keys[0] + "=..."
		}
		allowed := in.Decisions
		if len(allowed) == 0 {
			allowed = []string{"approve", "edit", "reject"}
		}
		fmt.Fprintln(w, "decide with:")
		for _, d := range allowed {
			if how, ok := decide[d]; ok {
				fmt.Fprintf(w, "  interlock answer %s %s %s\n", flow, in.Run, how)
			}
		}
		return
	}
	if in.ExpiresAt != "" {
		shown := in.ExpiresAt
		if t, err := time.Parse(time.RFC3339, in.ExpiresAt); err == nil {
			shown = deadline(t, time.Now())
		}
		fmt.Fprintf(w, "  deadline: %s\n", shown)
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
