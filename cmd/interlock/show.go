package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

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
	if cp.FlowVersion != "" && (cp.Status == protocol.StatusWaiting || cp.Status == protocol.StatusRunning) {
		workers, err := c.Workers(ctx)
		if err == nil && !slices.ContainsFunc(workers, func(w protocol.Worker) bool { return w.Carries(cp.Flow, cp.FlowVersion) }) {
			fmt.Fprintf(stdout, "no running worker runs or migrates from version %s of flow %s: the run's commands wait, held for one (interlock flows; interlock runs migrate %s --from %s --to VERSION moves it)\n",
				cp.FlowVersion, cp.Flow, cp.Flow, cp.FlowVersion)
		}
	}
	return nil
}

func printCheckpoint(w io.Writer, cp protocol.Checkpoint) {
	fmt.Fprintf(w, "run %s of flow %s: %s at node %s (checkpoint %d)\n", cp.Run, cp.Flow, cp.Status, cp.Node, cp.Checkpoint)
	fmt.Fprintf(w, "created %s, updated %s\n", cp.CreatedAt.Local().Format(time.DateTime), cp.UpdatedAt.Local().Format(time.DateTime))
	if o := cp.Outcome(); o != "" {
		fmt.Fprintf(w, "outcome %s\n", o)
	}
	if cp.FlowVersion != "" {
		fmt.Fprintf(w, "flow version %s\n", cp.FlowVersion)
	}
	if cp.Error != "" {
		fmt.Fprintf(w, "error: %s\n", cp.Error)
	}
	if in, ok := cp.Interrupted(); ok {
		fmt.Fprintf(w, "waiting on %s interrupt %s\n", in.Kind, in.RequestID)
		viewOf(in.Kind).show(w, in)
		if in.ExpiresAt != nil {
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

// printDecisions shows the approval decisions a checkpoint holds.
func printDecisions(w io.Writer, ds []protocol.Decision) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintln(w, "decisions:")
	for _, d := range ds {
		args, _ := json.Marshal(d.Args)
		fmt.Fprintf(w, "  %s  %s %s by %s, args %s", d.At.Local().Format(time.DateTime), d.Verdict, d.Action, d.Approver, compactJSON(args))
		if d.Reason != "" {
			fmt.Fprintf(w, "; reason: %s", d.Reason)
		}
		fmt.Fprintln(w)
	}
}
