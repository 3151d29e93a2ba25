package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

func pendingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		q            client.PendingQuery
		kinds, roles listFlag
	)
	cf, c, _, closeFn, err := clientCommand(ctx, "pending", "pending [--flow NAME] [--kind KIND] [--role ROLE] [--newest] [--limit N] [--after CURSOR]", stderr, args, 0, func(fs *flag.FlagSet) {
		fs.StringVar(&q.Flow, "flow", "", "only runs of this `flow`")
		fs.Var(&kinds, "kind", "only interrupts of this `kind`: "+protocol.KindsText()+" (repeat for more)")
		fs.Var(&roles, "role", "only approvals for this approver `role` (repeat for more)")
		fs.BoolVar(&q.Newest, "newest", false, "the most recently asked first (the default is oldest first)")
		fs.IntVar(&q.Limit, "limit", client.DefaultPendingLimit, "show at most `n` runs")
		fs.StringVar(&q.After, "after", "", "show the page after this `cursor` (printed with the previous page)")
	}, func([]string) error {
		q.Kinds, q.Roles = kinds, roles
		for _, k := range kinds {
			if _, ok := protocol.SpecOf(k); !ok {
				return usagef("--kind %q: use %s", k, protocol.KindsText())
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
		what := viewOf(p.Kind).what(p.Interrupted())
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
