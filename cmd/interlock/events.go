package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
)

// eventsCmd is `interlock events <flow> <run>`, which prints the events of
// a run that the events stream still holds, oldest first. It reads them
// with direct gets, as any client that may read events may (the nats
// CLI's `stream view` creates a consumer, which a client may not).
func eventsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	limit := client.MaxPendingLimit
	cf, c, pos, closeFn, err := clientCommand(ctx, "events", "events <flow> <run> [--limit N] [--json]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.IntVar(&limit, "limit", client.MaxPendingLimit, fmt.Sprintf("print at most `n` events (1 to %d)", client.MaxPendingLimit))
	}, checkFlowRun)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	if limit < 1 || limit > client.MaxPendingLimit {
		return usageOf("events", "--limit %d is out of range: use 1 to %d", limit, client.MaxPendingLimit)
	}
	evs, more, err := c.RunEvents(ctx, pos[0], pos[1], limit)
	if err != nil {
		return err
	}
	if cf.json {
		raw := make([]json.RawMessage, 0, len(evs))
		for _, ev := range evs {
			b, err := json.Marshal(ev.Event)
			if err != nil {
				return err
			}
			raw = append(raw, b)
		}
		return writeJSON(stdout, raw)
	}
	if len(evs) == 0 {
		fmt.Fprintf(stdout, "the events stream holds no event of run %s of flow %s (it keeps them for --events-max-age)\n", pos[1], pos[0])
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tDETAILS")
	for _, ev := range evs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ev.Seq, ev.Event.Time().Local().Format(time.DateTime), ev.Kind, eventDetails(ev))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(stdout, "(more events follow: raise --limit)\n")
	}
	return nil
}

// eventDetails says in a few words what an event carries.
func eventDetails(ev client.StreamEvent) string {
	var d struct {
		Node      string `json:"node"`
		Kind      string `json:"kind"`
		RequestID string `json:"requestId"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		Decision  string `json:"decision"`
		Approver  string `json:"approver"`
		Error     string `json:"error"`
	}
	_ = json.Unmarshal(ev.Event.Data(), &d)
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("node", d.Node)
	add("kind", d.Kind)
	add("request", d.RequestID)
	add("decision", d.Decision)
	add("by", d.Approver)
	add("code", d.Code)
	add("message", d.Message)
	add("error", d.Error)
	return strings.Join(parts, " ")
}
