package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// answerSynopsis is the usage line of answer: answers to a question or
// choice, or a decision on an approval.
const answerSynopsis = `answer <flow> <run> [field=value ...] [--select ID ...]
       interlock answer <flow> <run> --approve | --reject | --edit field=value ... [--reason TEXT] [--approver NAME]
       interlock answer <flow> <run> --respond --message TEXT`

func answerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		selected, edits     listFlag
		approve, reject     bool
		respond             bool
		answersJSON, update string
		approver, reason    string
		message             string
		token, key, role    string
		expect              int64
		r                   protocol.Resume
		answerArgs          []assignment
		editArgs            []assignment
	)
	cf, c, pos, closeFn, err := clientCommand(ctx, "answer", answerSynopsis, stderr, args, 2, func(fs *flag.FlagSet) {
		fs.Var(&selected, "select", "option `id` to choose (repeat for several)")
		fs.StringVar(&answersJSON, "answers", "", "answers as a JSON `object`")
		fs.BoolVar(&approve, "approve", false, "approve the pending approval: its action runs with the proposed args")
		fs.BoolVar(&reject, "reject", false, "reject the pending approval: its action never runs (give --reason to say why)")
		fs.BoolVar(&respond, "respond", false, "neither approve nor reject, but answer whoever asked with --message: the action does not run (only where the approval lists respond)")
		fs.StringVar(&message, "message", "", "with --respond: the `text` for whoever asked (the agent, or the node that waits)")
		fs.Var(&edits, "edit", "approve with the arg changed: `field=value` (JSON if it parses, else a string; a string when the proposed arg is one) or field:=JSON; repeat for several")
		fs.StringVar(&update, "update", "", "state update as a JSON `object`, merged through the flow's reducers")
		fs.StringVar(&approver, "approver", "", "`name` of who answers or decides, for the audit record (default: --as)")
		fs.StringVar(&role, "role", "", "decide as approver `role`: send on <prefix>.in.<flow>.resume.<role>, which NATS permissions may require (with authorization configured, approvals are decided only that way)")
		fs.StringVar(&reason, "reason", "", "`reason` for the audit record (a rejection's reason is kept in the run's state)")
		fs.StringVar(&token, "token", "", "resume `token` (default: read from the run's last interrupted event)")
		fs.StringVar(&key, "idempotency-key", "", "`key` so a repeat of this answer has its effect once; a repeat reports \"already applied\" and the run as it stands")
		fs.Int64Var(&expect, "expect-checkpoint", -1, "refuse unless the run is at checkpoint `n`")
	}, func(pos []string) error {
		if err := checkFlowRun(pos); err != nil {
			return err
		}
		r = protocol.Resume{Selected: selected, Approver: approver, Reason: reason, Message: message, IdempotencyKey: key, ResumeToken: token}
		var err error
		if r.Decision, err = decisionOf(approve, reject, respond, edits); err != nil {
			return err
		}
		switch {
		case respond && strings.TrimSpace(message) == "":
			return usageOf("answer", "--respond needs --message TEXT, the answer for whoever asked: interlock answer %s %s --respond --message \"...\"", pos[0], pos[1])
		case !respond && message != "":
			return usageOf("answer", "--message goes with --respond, which answers whoever asked instead of deciding; to say why you approve or reject, use --reason")
		}
		if r.Decision != "" && (len(pos) > 2 || answersJSON != "" || len(selected) > 0) {
			return usageOf("answer", "--%s decides an approval, while field=value answers, --answers and --select answer a question or choice: give one or the other", r.Decision)
		}
		var err2 error
		if editArgs, err2 = parseAssignments("--edit", edits); err2 != nil {
			return err2
		}
		if answerArgs, err2 = parseAssignments("argument", pos[2:]); err2 != nil {
			return err2
		}
		if answersJSON != "" {
			if err := json.Unmarshal([]byte(answersJSON), &r.Answers); err != nil {
				return usagef("--answers must be a JSON object: %v", err)
			}
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
		if len(r.Answers) == 0 && len(answerArgs) == 0 && len(r.Selected) == 0 && len(r.Update) == 0 && r.Decision == "" {
			return usageOf("answer", "nothing to send: give field=value answers or --select ID, or decide an approval with --approve, --reject, --edit field=value or --respond --message TEXT: interlock answer %s %s field=value ...", pos[0], pos[1])
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
	in, waiting := cp.Interrupted()
	waiting = waiting && cp.Waiting()
	if err := typedValues(&r, answerArgs, editArgs, in); err != nil {
		return err
	}
	if waiting && !repeat {
		if err := fitsInterrupt(flow, run, in, cp.Interrupt.Asked(), r.Answer()); err != nil {
			return err
		}
	}
	if token == "" {
		last, err := c.LastInterrupt(ctx, flow, run)
		if err != nil && !repeat {
			return err
		}
		r.ResumeToken, r.RequestID = last.ResumeToken, last.RequestID
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
	if waiting && reasked(in, ev) {
		return reported(exitReasked)
	}
	return nil
}

// decisionOf returns the decision the flags of answer give: "" for none,
// or a usage error when more than one is given.
func decisionOf(approve, reject, respond bool, edits []string) (string, error) {
	var given []string
	if approve {
		given = append(given, "--approve")
	}
	if reject {
		given = append(given, "--reject")
	}
	if respond {
		given = append(given, "--respond")
	}
	if len(edits) > 0 {
		given = append(given, "--edit")
	}
	switch len(given) {
	case 0:
		return "", nil
	case 1:
		return map[string]string{"--approve": "approve", "--reject": "reject", "--respond": "respond", "--edit": "edit"}[given[0]], nil
	}
	return "", usageOf("answer", "give one decision, not %s: --approve, --reject, --respond --message TEXT or --edit field=value (repeat --edit to change several args)", strings.Join(given, " and "))
}

// typedValues reads the field=value answers and --edit values by the one
// rule of [protocol.Value]: an answer takes the type of its question's
// field, an edit the type of the arg it changes.
func typedValues(r *protocol.Resume, answerArgs, editArgs []assignment, in protocol.Interrupted) error {
	if len(answerArgs) > 0 {
		types := map[string]string{}
		for _, q := range in.Questions {
			types[q.Field] = q.Type
		}
		answers, err := values("argument", answerArgs, func(f string) string { return types[f] })
		if err != nil {
			return err
		}
		if r.Answers == nil {
			r.Answers = map[string]json.RawMessage{}
		}
		maps.Copy(r.Answers, answers)
	}
	if len(editArgs) > 0 {
		var proposed map[string]json.RawMessage
		_ = json.Unmarshal(in.Args, &proposed)
		edits, err := values("--edit", editArgs, func(f string) string { return protocol.JSONTypeOf(proposed[f]) })
		if err != nil {
			return err
		}
		r.Edits = edits
	}
	return nil
}

// fitsInterrupt checks what answer sends against the interrupt the run
// waits on, by the kind's own rule, and says what the interrupt wants
// when it does not fit.
func fitsInterrupt(flow, run string, in protocol.Interrupted, asked protocol.Asked, a protocol.Answer) error {
	spec, ok := protocol.SpecOf(in.Kind)
	if !ok {
		return nil // a kind this version does not know: Interlock checks
	}
	err := spec.Check(asked, a)
	if err == nil {
		return nil
	}
	v := viewOf(in.Kind)
	var how []string
	for _, args := range v.answers(in) {
		how = append(how, fmt.Sprintf("interlock answer %s %s %s", flow, run, args))
	}
	return usageOf("answer", "run %s of flow %s waits on %s: %v; %s with %s", run, flow, v.what(in), err, verbOf(in.Kind), strings.Join(how, ", or "))
}

// argNames returns the names of an approval's args, sorted.
func argNames(args json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// reasked reports whether ev asks again what the interrupt prev asked,
// at the same node, by the kind's rule.
func reasked(prev protocol.Interrupted, ev client.Event) bool {
	if ev.Kind != protocol.EventInterrupted {
		return false
	}
	var next protocol.Interrupted
	if ev.Decode(&next) != nil || next.Node != prev.Node || next.Kind != prev.Kind {
		return false
	}
	return viewOf(next.Kind).reasked(prev, next)
}

// printRepeat reports an answer Interlock had already applied, and the run
// as it stands.
func printRepeat(stdout io.Writer, asJSON bool, key string, cp *protocol.Checkpoint) error {
	if asJSON {
		return writeJSON(stdout, map[string]any{"alreadyApplied": true, "idempotencyKey": key, "run": cp})
	}
	fmt.Fprintf(stdout, "already applied: an answer with idempotency key %q was applied before; this one changed nothing\n", key)
	printCheckpoint(stdout, *cp)
	return nil
}
