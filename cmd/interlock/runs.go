package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
)

// maxOutcome bounds the outcome column of `interlock runs`: an error or a
// reason longer than this is cut (--json has it whole, up to 1 KiB).
const maxOutcome = 80

// runsCmd is `interlock runs`, which lists runs of every status newest
// first, a page at a time, from the pending and finished-runs indexes
// (client.ListRuns): what waits, and what finished and how.
func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "migrate" {
		return runsMigrateCmd(ctx, args[1:], stdout, stderr)
	}
	var (
		q        client.RunsQuery
		statuses listFlag
	)
	listed := append(client.RunsStatuses(), client.StatusFinished)
	cf, c, _, closeFn, err := clientCommand(ctx, "runs", "runs [--flow NAME] [--status STATUS] [--limit N] [--after CURSOR] [--json]\n       interlock "+runsMigrateSynopsis, stderr, args, 0, func(fs *flag.FlagSet) {
		fs.StringVar(&q.Flow, "flow", "", "only runs of this `flow`")
		fs.Var(&statuses, "status", "only runs of this `status`: "+strings.Join(listed, ", ")+" (finished: the last four; repeat, or separate with commas, for more)")
		fs.IntVar(&q.Limit, "limit", client.DefaultRunsLimit, fmt.Sprintf("show at most `n` runs (1 to %d)", client.MaxRunsLimit))
		fs.StringVar(&q.After, "after", "", "show the page after this `cursor` (printed with the previous page)")
	}, func([]string) error {
		for _, s := range statuses {
			for _, status := range strings.Split(s, ",") {
				switch status = strings.TrimSpace(status); {
				case status == client.StatusRunning:
					return usagef("--status running: runs are not listed while running (a worker is inside a transition, and no index holds the run then); read one with `interlock show <flow> <run>`")
				case !slices.Contains(listed, status):
					return usagef("--status %q: use %s", status, strings.Join(listed, ", "))
				}
				q.Statuses = append(q.Statuses, status)
			}
		}
		if q.Limit < 1 || q.Limit > client.MaxRunsLimit {
			return usagef("--limit %d: use 1 to %d", q.Limit, client.MaxRunsLimit)
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	page, err := c.ListRuns(ctx, q)
	if errors.Is(err, client.ErrCursor) || errors.Is(err, client.ErrStatus) {
		return usageOf("runs", "%s", strings.TrimPrefix(err.Error(), "client: "))
	}
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSON(stdout, page)
	}
	if len(page.Items) == 0 {
		if q.After != "" {
			fmt.Fprintln(stdout, "No more runs.")
		} else {
			fmt.Fprintf(stdout, "No runs (%s).\n", strings.Join(page.Statuses, ", "))
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tRUN\tSTATUS\tNODE\tOUTCOME\tCHECKPOINT\tCHANGED")
	for _, it := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", it.Flow, it.Run, it.Status, it.Node, cut(it.Outcome(), maxOutcome),
			it.Checkpoint, it.ChangedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d shown, newest first; statuses %s (runs are not listed while running).\n", len(page.Items), strings.Join(page.Statuses, ", "))
	if page.Next != "" {
		next := "interlock runs"
		if q.Flow != "" {
			next += " --flow " + q.Flow
		}
		if len(q.Statuses) > 0 {
			next += " --status " + strings.Join(q.Statuses, ",")
		}
		if q.Limit != client.DefaultRunsLimit {
			next += " --limit " + strconv.Itoa(q.Limit)
		}
		fmt.Fprintf(stdout, "Next page: %s --after %s\n", next, page.Next)
	}
	return nil
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
