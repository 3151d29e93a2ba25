package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/interlockhq/interlock/protocol"
)

// assignSynopsis is the usage line of assign.
const assignSynopsis = `assign claim|release|delegate <flow> <run> [--to PERSON|role:NAME] [--reason TEXT] [--request-id ID]`

func assignCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		a  protocol.Assign
		op string
	)
	cf, c, pos, closeFn, err := clientCommand(ctx, "assign", assignSynopsis, stderr, args, 3, func(fs *flag.FlagSet) {
		fs.StringVar(&a.To, "to", "", "with delegate: the `person` (or role, as role:NAME) who may decide the approval from now on")
		fs.StringVar(&a.Reason, "reason", "", "why, for the audit record and the assigned event")
		fs.StringVar(&a.RequestID, "request-id", "", "the pending request's `id` (default: the one the run waits on now)")
	}, func(pos []string) error {
		op = pos[0]
		switch op {
		case protocol.AssignClaim, protocol.AssignRelease:
			if a.To != "" {
				return usageOf("assign", "--to names whom a delegation hands the approval to; %s takes none: interlock assign %s %s %s", op, op, pos[1], pos[2])
			}
		case protocol.AssignDelegate:
			if strings.TrimSpace(a.To) == "" {
				return usageOf("assign", "delegate needs --to: a person, or a role as role:NAME: interlock assign delegate %s %s --to ann@example.com", pos[1], pos[2])
			}
		default:
			return usageOf("assign", "%q is not claim, release or delegate: interlock %s", op, assignSynopsis)
		}
		return checkFlowRun(pos[1:])
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	flow, run := pos[1], pos[2]
	a.Op = op
	ev, err := c.Assign(ctx, flow, run, a)
	if err != nil {
		return err
	}
	if ev.Kind != protocol.EventAssigned || cf.json {
		return printOutcome(stdout, stderr, cf.json, flow, ev)
	}
	var d protocol.Assigned
	if err := ev.Decode(&d); err != nil {
		return err
	}
	printAssigned(stdout, d)
	return nil
}

// printAssigned says who may now decide an approval after an assign.
func printAssigned(w io.Writer, d protocol.Assigned) {
	did := map[string]string{protocol.AssignClaim: "claimed", protocol.AssignRelease: "released", protocol.AssignDelegate: "delegated"}[d.Op]
	fmt.Fprintf(w, "request %s of run %s of %s %s by %s\n", d.RequestID, d.Run, d.Flow, did, d.By)
	switch {
	case d.ClaimedBy != "":
		fmt.Fprintf(w, "  only %s may decide it, until they release it\n", d.ClaimedBy)
	case len(d.Assignees) > 0 && d.ApproverRole != "":
		fmt.Fprintf(w, "  %s, or anyone with role %s, may decide it\n", strings.Join(d.Assignees, ", "), d.ApproverRole)
	case len(d.Assignees) > 0:
		fmt.Fprintf(w, "  %s may decide it\n", strings.Join(d.Assignees, ", "))
	case d.ApproverRole != "":
		fmt.Fprintf(w, "  anyone with role %s may decide it\n", d.ApproverRole)
	}
}
