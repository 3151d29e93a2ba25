package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
)

// auditCmd is `interlock audit <flow> <run>`, which prints a run's audit
// records, and `interlock audit verify <flow> <run>`, which checks their
// hash chain. A broken chain exits 1 (failed).
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cf, c, pos, closeFn, err := clientCommand(ctx, "audit", "audit [verify] <flow> <run> [--json]", stderr, args, 2, nil, func(pos []string) error {
		if pos[0] == "verify" {
			pos = pos[1:]
		}
		return checkFlowRun(pos)
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	if pos[0] == "verify" {
		return verifyAudit(ctx, c, stdout, cf.json, pos[1], pos[2])
	}
	flow, run := pos[0], pos[1]
	recs, err := c.Audit(ctx, flow, run)
	if err != nil {
		return err
	}
	if cf.json {
		raw := make([]json.RawMessage, len(recs))
		for i, r := range recs {
			raw[i] = r.Data
		}
		return writeJSON(stdout, raw)
	}
	if len(recs) == 0 {
		fmt.Fprintf(stdout, "run %s of flow %s has no audit records (older ones age out of the audit stream)\n", run, flow)
		return nil
	}
	return printAudit(stdout, recs)
}

// printAudit prints audit records one a line.
func printAudit(w io.Writer, recs []events.AuditRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTIME\tACTION\tBY\tNODE\tKIND\tDETAILS")
	deadlines := map[string]time.Time{} // by request id, from the records that set them
	for _, r := range recs {
		if r.ExpiresAt != nil && r.RequestID != "" {
			deadlines[r.RequestID] = *r.ExpiresAt
		}
		seq := "-"
		if !r.Side {
			seq = fmt.Sprint(r.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", seq, r.At.Local().Format(time.DateTime), r.Action,
			orDash(r.By), orDash(r.Node), orDash(r.Kind), auditDetails(r, deadlines))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// auditDetails says what a record is about, beyond its columns.
func auditDetails(r events.AuditRecord, deadlines map[string]time.Time) string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	a := r.Approval
	switch r.Action {
	case events.AuditInterrupted:
		if a != nil {
			add("%s %s", a.Action, compactJSON(a.Args))
		}
		if r.ApproverRole != "" {
			add("for role %s", r.ApproverRole)
		}
		if r.ExpiresAt != nil {
			add("deadline %s", r.ExpiresAt.Local().Format(time.DateTime))
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case events.AuditApproved, events.AuditRejected:
		if a != nil {
			add("%s %s", a.Action, compactJSON(a.Args))
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case events.AuditEdited:
		if a != nil {
			add("%s %s → %s", a.Action, compactJSON(a.Args), compactJSON(a.Final))
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case events.AuditEscalated:
		add("from %s to %s", orDash(r.EscalatedFrom), orDash(r.ApproverRole))
		if r.Replaces != "" {
			add("replaces %s", r.Replaces)
		}
	case events.AuditExpired:
		at := r.ExpiresAt
		if at == nil {
			if d, ok := deadlines[r.RequestID]; ok {
				at = &d
			}
		}
		if at != nil {
			add("deadline %s passed", at.Local().Format(time.DateTime))
		} else {
			add("deadline passed")
		}
	case events.AuditRefused:
		add("%s: %s", r.Code, r.Reason)
	case events.AuditReannounced:
		if r.Replaces != "" {
			add("replaces %s", r.Replaces)
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	default:
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	}
	if r.Trusted {
		add("trusted caller")
	}
	if o := r.Outcome; o != nil {
		switch o.Status {
		case events.StatusCompleted, events.StatusCancelled, events.StatusExpired:
			add("→ %s", o.Status)
		case events.StatusFailed:
			add("→ failed: %s", o.Error)
		}
	}
	return strings.Join(parts, "; ")
}

// verifyAudit prints whether a run's audit chain is intact, or where it
// breaks; a broken chain is reported and exits 1.
func verifyAudit(ctx context.Context, c *client.Client, stdout io.Writer, asJSON bool, flow, run string) error {
	rep, err := c.VerifyAudit(ctx, flow, run)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printAuditReport(stdout, rep)
	}
	if !rep.Intact {
		return reported(exitFailed)
	}
	return nil
}

func printAuditReport(w io.Writer, rep client.AuditReport) {
	if rep.Intact {
		head := rep.Head.Hash
		if head == "" {
			head = "(none: no records)"
		}
		fmt.Fprintf(w, "audit chain of %s %s intact: %s (%s), head %s\n", rep.Flow, rep.Run,
			plural(rep.Records, "record"), plural(rep.Refusals, "refusal"), head)
	} else {
		fmt.Fprintf(w, "audit chain of %s %s BROKEN: %s in %s (%s)\n", rep.Flow, rep.Run,
			plural(len(rep.Problems), "problem"), plural(rep.Records, "record"), plural(rep.Refusals, "refusal"))
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  %s\n", p.Message)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
