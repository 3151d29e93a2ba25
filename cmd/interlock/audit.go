package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// auditCmd is `interlock audit <flow> <run>`, which prints a run's audit
// records, marking those the verifier cannot vouch for; `interlock audit
// verify <flow> <run>`, which checks their signatures and hash chain and
// exits 1 (failed) when it cannot vouch for every record; and `interlock
// audit key`, which prints the audit public keys the workers published.
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var pinned auditKeys
	cf, c, pos, closeFn, err := clientCommand(ctx, "audit", "audit [verify] <flow> <run> [--key KEY ...] [--json] | audit key [--json]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.Var(&pinned, "key", "verify with this audit public `key` alone (base64, as `interlock audit key` and serve print it), not with the keys published in <prefix>_config; repeat it for several")
	}, func(pos []string) error {
		switch pos[0] {
		case "key":
			if len(pinned) > 0 {
				return usagef("audit key prints the published keys; --key pins a key for audit and audit verify")
			}
			return nil
		case "verify":
			pos = pos[1:]
		}
		return checkFlowRun(pos)
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	switch pos[0] {
	case "key":
		return printAuditKeys(ctx, c, stdout, cf.json, cf.prefix)
	case "verify":
		return verifyAudit(ctx, c, stdout, cf.json, pos[1], pos[2], pinned)
	}
	flow, run := pos[0], pos[1]
	trail, err := c.AuditTrail(ctx, flow, run, pinned...)
	if err != nil {
		return err
	}
	unvouched := len(trail.Report.Unvouched)
	if cf.json {
		out := make([]auditMessage, len(trail.Entries))
		for i, e := range trail.Entries {
			out[i] = auditMessage{StreamSeq: e.StreamSeq, Vouched: e.Vouched, Checks: e.Checks, Record: e.Record.Data}
			if e.Err != nil {
				out[i].Error = e.Err.Error()
			}
		}
		return writeJSON(stdout, out)
	}
	if len(trail.Entries) == 0 {
		fmt.Fprintf(stdout, "run %s of flow %s has no audit records (older ones age out of the audit stream)\n", run, flow)
		return nil
	}
	if err := printAudit(stdout, trail.Entries); err != nil {
		return err
	}
	if unvouched > 0 {
		them := "they are"
		if unvouched == 1 {
			them = "it is"
		}
		fmt.Fprintf(stdout, "\n%s marked ! cannot be vouched for: %s no part of the run's history. `interlock audit verify %s %s` says why.\n",
			plural(unvouched, "message"), them, flow, run)
	}
	return nil
}

// auditKeys are the audit public keys given with --key.
type auditKeys []protocol.AuditKey

func (k *auditKeys) String() string {
	kids := make([]string, len(*k))
	for i, key := range *k {
		kids[i] = key.Kid
	}
	return strings.Join(kids, ",")
}

func (k *auditKeys) Set(s string) error {
	key, err := protocol.ParseAuditKey(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "protocol: "))
	}
	*k = append(*k, key)
	return nil
}

// auditMessage is a message of `interlock audit --json`: the record as
// stored, with the verifier's verdict on it.
type auditMessage struct {
	StreamSeq uint64 `json:"streamSeq"`
	// Vouched is false for a message the verifier cannot vouch for; Checks
	// are the checks it failed.
	Vouched bool     `json:"vouched"`
	Checks  []string `json:"checks,omitempty"`
	// Error says why the message is not an audit record; Record is the
	// record as stored, the input of its hash, when it is one.
	Error  string          `json:"error,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`
}

// printAuditKeys prints the audit public keys the workers published.
func printAuditKeys(ctx context.Context, c *client.Client, stdout io.Writer, asJSON bool, prefix string) error {
	keys, err := c.AuditKeys(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, keys)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tPUBLIC KEY (ED25519)\tSINCE")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Kid, k.PublicKey, k.Since.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nThe workers published these keys in %s, key %s; anyone who may write there may add one.\n"+
		"Check a key against the one `interlock serve` printed at start, then pin it: interlock audit verify --key %s <flow> <run>\n",
		wire.Names{Prefix: prefix}.ConfigBucket(), protocol.AuditKeysKey, keys[len(keys)-1].PublicKey)
	return nil
}

// printAudit prints a run's audit messages one a line. A message the
// verifier cannot vouch for is marked ! and shown as what it claims, not
// as a decision.
func printAudit(w io.Writer, entries []client.AuditEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTIME\tACTION\tBY\tNODE\tKIND\tDETAILS")
	deadlines := map[string]time.Time{} // by request id, from the records that set them
	for i, e := range entries {
		r := e.Record
		if !e.Vouched {
			at, claims := "-", "not an audit record: "+strings.TrimPrefix(fmt.Sprint(e.Err), "protocol: ")
			if e.Err == nil {
				if !r.At.IsZero() {
					at = r.At.Local().Format(time.DateTime)
				}
				claims = fmt.Sprintf("claims %s by %s", orDash(r.Action), orDash(r.By))
				if r.Side {
					claims += " (side record)"
				} else if r.Seq > 0 {
					claims += fmt.Sprintf(" (seq %d)", r.Seq)
				}
			}
			fmt.Fprintf(tw, "!\t%s\tUNVOUCHED\t-\t-\t-\t%s; not vouched for: %s (stream seq %d)\n", at, claims, whyNot(e.Checks), e.StreamSeq)
			continue
		}
		if r.ExpiresAt != nil && r.RequestID != "" {
			deadlines[r.RequestID] = *r.ExpiresAt
		}
		seq := "-"
		if !r.Side {
			seq = fmt.Sprint(r.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", seq, r.At.Local().Format(time.DateTime), r.Action,
			orDash(r.By), orDash(r.Node), orDash(r.Kind), auditDetails(r, deadlines))
		if r.Paused() && !interruptedNext(entries[i+1:]) {
			// The record's outcome holds the pause: shown on a line of its
			// own, marked as part of the record above, as the interrupted
			// record of chains written before showed it.
			o := r.Outcome
			if o.ExpiresAt != nil {
				deadlines[o.RequestID] = *o.ExpiresAt
			}
			fmt.Fprintf(tw, "↳\t%s\t%s\t-\t%s\t%s\t%s\n", r.At.Local().Format(time.DateTime), protocol.ActionInterrupted,
				orDash(o.Node), orDash(o.Kind), pauseDetails(o.Approval, o.ApproverRole, o.ExpiresAt, o.Reason))
		}
	}
	return tw.Flush()
}

// interruptedNext reports whether the next entry is a vouched interrupted
// record: a chain written before pauses were folded into the outcome of
// the record of the transition that paused the run.
func interruptedNext(rest []client.AuditEntry) bool {
	return len(rest) > 0 && rest[0].Vouched && rest[0].Record.Action == protocol.ActionInterrupted
}

// pauseDetails says what a paused run waits for: an approval's proposal,
// the role, the deadline and the reason.
func pauseDetails(a *protocol.AuditApproval, role string, expires *time.Time, reason string) string {
	var parts []string
	if a != nil {
		parts = append(parts, fmt.Sprintf("%s %s", a.Action, compactJSON(a.Args)))
	}
	if role != "" {
		parts = append(parts, "for role "+role)
	}
	if expires != nil {
		parts = append(parts, "deadline "+expires.Local().Format(time.DateTime))
	}
	if reason != "" {
		parts = append(parts, "reason: "+reason)
	}
	return strings.Join(parts, "; ")
}

// whyNot says in words why records are not vouched for, from the checks
// they failed.
func whyNot(checks []string) string {
	var out []string
	for _, c := range checks {
		w := c
		switch c {
		case client.CheckRecord:
			w = "not a record of this run"
		case client.CheckType:
			w = "wrong event type"
		case client.CheckHash:
			w = "altered"
		case client.CheckKey:
			w = "signed with an unknown key"
		case client.CheckSignature:
			w = "bad signature"
		case client.CheckSide:
			w = "a side record that is no refusal"
		case client.CheckSeq, client.CheckPrev, client.CheckChain, client.CheckMissing:
			w = "out of the chain"
		case client.CheckHead:
			w = "after the checkpoint's head"
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return strings.Join(out, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// auditDetails says what a record is about, beyond its columns.
func auditDetails(r protocol.AuditRecord, deadlines map[string]time.Time) string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	a := r.Approval
	switch r.Action {
	case protocol.ActionInterrupted:
		if d := pauseDetails(a, r.ApproverRole, r.ExpiresAt, r.Reason); d != "" {
			add("%s", d)
		}
	case protocol.ActionApproved, protocol.ActionRejected:
		if a != nil {
			add("%s %s", a.Action, compactJSON(a.Args))
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case protocol.ActionEdited:
		if a != nil {
			add("%s %s → %s", a.Action, compactJSON(a.Args), compactJSON(a.Final))
		}
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case protocol.ActionEscalated:
		add("from %s to %s", orDash(r.EscalatedFrom), orDash(r.ApproverRole))
		if r.Replaces != "" {
			add("replaces %s", r.Replaces)
		}
	case protocol.ActionExpired:
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
	case protocol.ActionRefused:
		add("%s: %s", r.Code, r.Reason)
	case protocol.ActionMigrated:
		if m := r.Migration; m != nil {
			add("version %s → %s", m.From, m.To)
			if m.Node != "" && m.Node != r.Node {
				add("node %s → %s", m.Node, r.Node)
			}
		}
	case protocol.ActionDelegated:
		add("to %s", r.To)
		if r.Reason != "" {
			add("reason: %s", r.Reason)
		}
	case protocol.ActionResponded:
		add("message: %s", r.Message)
	case protocol.ActionReannounced:
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
		case protocol.StatusCompleted, protocol.StatusCancelled, protocol.StatusExpired:
			add("→ %s", o.Status)
		case protocol.StatusFailed:
			add("→ failed: %s", o.Error)
		}
	}
	return strings.Join(parts, "; ")
}

// verifyAudit prints whether the verifier vouches for every record of a
// run and its chain is intact, or which records it cannot vouch for and
// why, and where the chain breaks; anything short of intact exits 1.
func verifyAudit(ctx context.Context, c *client.Client, stdout io.Writer, asJSON bool, flow, run string, pinned []protocol.AuditKey) error {
	rep, err := c.VerifyAudit(ctx, flow, run, pinned...)
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
	counts := fmt.Sprintf("%s (%s)", plural(rep.Records, "record"), plural(rep.Refusals, "refusal"))
	switch {
	case rep.Intact:
		head := rep.Head.Hash
		if head == "" {
			head = "(none: no records)"
		}
		signed := ""
		if len(rep.SignedBy) > 0 {
			from := "published"
			if rep.KeysPinned {
				from = "pinned"
			}
			signed = fmt.Sprintf(", all signed with %s %s (%s)", pluralWord(len(rep.SignedBy), "key"), strings.Join(rep.SignedBy, ", "), from)
		}
		fmt.Fprintf(w, "audit chain of %s %s intact: %s%s, head %s\n", rep.Flow, rep.Run, counts, signed, head)
	case len(rep.Unvouched) > 0:
		fmt.Fprintf(w, "audit chain of %s %s NOT VOUCHED FOR: %d of %d messages cannot be vouched for, %s; %s\n", rep.Flow, rep.Run,
			len(rep.Unvouched), rep.Messages, plural(len(rep.Problems), "problem"), counts)
	default:
		fmt.Fprintf(w, "audit chain of %s %s BROKEN: %s; %s\n", rep.Flow, rep.Run, plural(len(rep.Problems), "problem"), counts)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "  %s\n", p.Message)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func pluralWord(n int, what string) string {
	if n == 1 {
		return what
	}
	return what + "s"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
