package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/interlockhq/interlock/client"
)

// flowVersion is one version of a flow: the running workers that have
// it, and how many runs wait under it.
type flowVersion struct {
	Flow    string   `json:"flow"`
	Version string   `json:"version"`
	Workers []string `json:"workers"`
	Waiting int      `json:"waiting"`
}

func flowsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cf, c, _, closeFn, err := clientCommand(ctx, "flows", "flows", stderr, args, 0, nil, nil)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	rows, err := flowVersions(ctx, c)
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSON(stdout, map[string]any{"versions": rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "No worker runs, and no run waits.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tVERSION\tWORKERS\tWAITING")
	var stranded []string
	for _, r := range rows {
		workers := strings.Join(r.Workers, ", ")
		if workers == "" {
			workers = "none"
			if r.Waiting > 0 {
				stranded = append(stranded, fmt.Sprintf("%d run(s) of %s wait under version %s, which no running worker has (their commands wait for one; to move them to a version a worker has: interlock runs migrate %s --from %s --to VERSION)", r.Waiting, r.Flow, r.Version, r.Flow, r.Version))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", r.Flow, r.Version, workers, r.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range stranded {
		fmt.Fprintln(stdout, s+": their answers go to the workers there are.")
	}
	return nil
}

// flowVersions reads who runs which version of each flow (the workers
// bucket: one entry per process) and how many runs wait under each (the
// pending index, a page at a time: what waits, never what finished).
func flowVersions(ctx context.Context, c *client.Client) ([]flowVersion, error) {
	workers, err := c.Workers(ctx)
	if err != nil {
		return nil, err
	}
	type key struct{ flow, version string }
	rows := map[key]*flowVersion{}
	row := func(k key) *flowVersion {
		if rows[k] == nil {
			rows[k] = &flowVersion{Flow: k.flow, Version: k.version, Workers: []string{}}
		}
		return rows[k]
	}
	for _, w := range workers {
		for flow, version := range w.Flows {
			r := row(key{flow, version})
			r.Workers = append(r.Workers, w.Instance)
		}
	}
	q := client.PendingQuery{Limit: client.MaxPendingLimit}
	for {
		page, err := c.ListPending(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Items {
			row(key{p.Flow, cmp.Or(p.FlowVersion, "(unrecorded)")}).Waiting++
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	// A worker that migrates from a version carries its runs on too.
	for k, r := range rows {
		for _, w := range workers {
			if w.Flows[k.flow] != k.version && w.Carries(k.flow, k.version) {
				r.Workers = append(r.Workers, w.Instance+" (migrates)")
			}
		}
	}
	out := make([]flowVersion, 0, len(rows))
	for _, r := range rows {
		slices.Sort(r.Workers)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b flowVersion) int {
		return cmp.Or(cmp.Compare(a.Flow, b.Flow), cmp.Compare(a.Version, b.Version))
	})
	return out, nil
}
