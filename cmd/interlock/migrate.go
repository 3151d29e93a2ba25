package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
)

// runsMigrateSynopsis is the usage of `interlock runs migrate`.
const runsMigrateSynopsis = "runs migrate <flow> --from VERSION --to VERSION [--dry-run] [--reason TEXT]"

// runsMigrateCmd is `interlock runs migrate`: it moves the runs of flow
// waiting on version --from to version --to, one at a time, each by a
// worker of --to in one audited transition (client.Migrate), reading
// the pending index a page at a time.
func runsMigrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var from, to, reason string
	var dry bool
	cf, c, pos, closeFn, err := clientCommand(ctx, "runs migrate", runsMigrateSynopsis, stderr, args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&from, "from", "", "the `version` the runs wait on (interlock flows lists them)")
		fs.StringVar(&to, "to", "", "the `version` to move them to, which a running worker has")
		fs.BoolVar(&dry, "dry-run", false, "list the runs that would move, and move none")
		fs.StringVar(&reason, "reason", "", "why, for the audit records (`text`)")
	}, func([]string) error {
		switch {
		case from == "" || to == "":
			return usagef("runs migrate needs --from VERSION and --to VERSION; interlock flows lists the versions runs wait on and the workers have")
		case from == to:
			return usagef("--from and --to are both %s; name the version to move the runs to", from)
		case engine.CheckVersion(from) != nil:
			return usagef("--from: %v", engine.CheckVersion(from))
		case engine.CheckVersion(to) != nil:
			return usagef("--to: %v", engine.CheckVersion(to))
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	flow := pos[0]
	out := stdout
	if cf.json {
		out = io.Discard // the summary alone, as JSON
	}
	var moved, refused, seen int
	q := client.PendingQuery{Flow: flow, Limit: client.MaxPendingLimit}
	for {
		page, err := c.ListPending(ctx, q)
		if err != nil {
			return err
		}
		for _, p := range page.Items {
			if p.FlowVersion != from {
				continue
			}
			seen++
			if dry {
				fmt.Fprintf(out, "would move %s (at node %s)\n", p.Run, p.Node)
				continue
			}
			rec, err := c.Migrate(ctx, flow, p.Run, from, to, reason)
			var ref *client.RefusedError
			switch {
			case errors.As(err, &ref):
				refused++
				fmt.Fprintf(out, "not moved %s: %s: %s\n", p.Run, ref.Refused.Code, ref.Refused.Message)
			case err != nil:
				return fmt.Errorf("moving run %s (%d moved so far): %w", p.Run, moved, err)
			default:
				moved++
				if rec.Migration != nil && rec.Migration.Node != rec.Node {
					fmt.Fprintf(out, "moved %s: node %s → %s\n", p.Run, rec.Migration.Node, rec.Node)
				} else {
					fmt.Fprintf(out, "moved %s (at node %s)\n", p.Run, rec.Node)
				}
			}
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	switch {
	case cf.json:
		return writeJSON(stdout, map[string]any{"flow": flow, "from": from, "to": to, "dryRun": dry, "runs": seen, "moved": moved, "refused": refused})
	case dry:
		fmt.Fprintf(stdout, "%d run(s) of flow %s wait on version %s; --dry-run moved none.\n", seen, flow, from)
	default:
		fmt.Fprintf(stdout, "%d run(s) of flow %s moved from version %s to %s; %d not moved.\n", moved, flow, from, to, refused)
	}
	if refused > 0 {
		return reported(exitRefused)
	}
	return nil
}
