package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// refundServer starts a server running the refund flow. It returns the
// URL the commands use (they connect as the anonymous client) and a
// JetStream connection with every right, to forge what a client may not
// publish.
func refundServer(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, refund.Flow())
	_, js := natstest.Connect(t, srv.ClientURL())
	return srv.ClientURL(), js
}

// startRefund starts a refund of amount and answers the identity
// question, leaving the run waiting on the supervisor's approval.
func startRefund(t *testing.T, url, id string, amount int) string {
	t.Helper()
	out, errOut, err := run(t, url, "start", "refund", "--run", id, "orderId=o-1", "amount:="+itoa(amount))
	if err != nil || !strings.Contains(out, "(last4)") {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run(t, url, "answer", "refund", id, "last4=1234")
	if err != nil {
		t.Fatalf("last4: %v\n%s%s", err, out, errOut)
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// completedState returns the final state printed by a command whose run
// completed.
func completedState(t *testing.T, out string) map[string]any {
	t.Helper()
	_, rest, ok := strings.Cut(out, "with state:\n")
	var state map[string]any
	if !ok || json.Unmarshal([]byte(rest), &state) != nil {
		t.Fatalf("no final state in:\n%s", out)
	}
	return state
}

// auditActions returns the ACTION column of `interlock audit`'s lines.
func auditActions(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "#") {
		t.Fatalf("no header in:\n%s", out)
	}
	var actions []string
	for _, l := range lines[1:] {
		if l == "" {
			break // the table's end
		}
		f := strings.Fields(l)
		if len(f) < 4 {
			t.Fatalf("short line %q", l)
		}
		actions = append(actions, f[3]) // #, date, time, action
	}
	return actions
}

// lineOf returns the first line of out holding s.
func lineOf(out, s string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// forge publishes an audit record Interlock never wrote onto a run's audit
// subject, with the hash computed as Interlock would.
func forge(t *testing.T, js jetstream.JetStream, id string, seq uint64, prev string) string {
	t.Helper()
	rec := map[string]any{
		"flow": "refund", "run": id, "action": "approved", "at": time.Now().UTC().Format(time.RFC3339Nano),
		"by": "mallory", "node": "review", "kind": "approval", "seq": seq, "prev": prev,
		"approval": map[string]any{"action": "issue_refund", "args": map[string]any{"amount": 99999, "orderId": "o-1"}},
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec["hash"], err = protocol.CanonicalHash(b); err != nil {
		t.Fatal(err)
	}
	natstest.Publish(t, js, wire.Names{Prefix: wire.DefaultPrefix}.Audit("refund", id), protocol.AuditType("approved"), id, rec)
	return rec["hash"].(string)
}

// TestAuditShowsAndVerifiesARefundAndCatchesAForgery walks a refund with
// a refused edit and an edit, reads its history with `interlock audit`,
// verifies it, then forges a record after the head and checks that verify
// catches it.
func TestAuditShowsAndVerifiesARefundAndCatchesAForgery(t *testing.T) {
	url, js := refundServer(t)

	out := startRefund(t, url, "r-a", 4800)
	for _, want := range []string{
		"waiting at review", "approval of issue_refund, for role supervisor",
		"reason: Refund exceeds $500 threshold. Supervisor review required.",
		`"amount": 4800`, `"orderId": "o-1"`, "decisions: approve, edit, reject", "deadline: ", " left)",
		"decide with:", "interlock answer refund r-a --approve", "interlock answer refund r-a --edit amount=...",
		"interlock answer refund r-a --reject --reason TEXT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the approval does not show %q:\n%s", want, out)
		}
	}
	out, _, err := run(t, url, "show", "refund", "r-a")
	if err != nil || !strings.Contains(out, "waiting on approval interrupt") || !strings.Contains(out, "approval of issue_refund, for role supervisor") ||
		!strings.Contains(out, `"amount": 4800`) || !strings.Contains(out, "deadline: ") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if want := "flow version " + refund.Flow().Version() + "\n"; !strings.Contains(out, want) {
		t.Errorf("show does not say %q:\n%s", want, out)
	}

	// An edit above the amount asked for: the args schema refuses it.
	_, errOut, err := run(t, url, "answer", "refund", "r-a", "--edit", "amount=9000", "--approver", "sam")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "refused (invalid_answer)") || !strings.Contains(errOut, "/amount: must be <= 4800") {
		t.Fatalf("edit above the amount: exit %d (%v) %q", codeOf(err), err, errOut)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-a", "--edit", "amount=400", "--approver", "sam", "--reason", "partial refund")
	if err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("edit: %v\n%s%s", err, out, errOut)
	}
	if r, _ := completedState(t, out)["refund"].(map[string]any); r["amount"] != 400.0 || r["approvedBy"] != "sam" {
		t.Fatalf("refund after the edit: %v\n%s", r, out)
	}
	out, _, err = run(t, url, "show", "refund", "r-a")
	if err != nil || !regexp.MustCompile(`edit issue_refund by sam, args \{"amount":400,.*reason: partial refund`).MatchString(out) {
		t.Fatalf("show of the decision: %v\n%s", err, out)
	}
	if !strings.Contains(out, "outcome edited\n") {
		t.Errorf("show does not say the run's outcome, edited:\n%s", out)
	}

	out, errOut, err = run(t, url, "audit", "refund", "r-a")
	if err != nil {
		t.Fatalf("audit: %v\n%s%s", err, out, errOut)
	}
	if got, want := auditActions(t, out), []string{"started", "interrupted", "answered", "interrupted", "refused", "edited"}; !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v:\n%s", got, want, out)
	}
	for s, want := range map[string][]string{
		"edited":          {" sam ", "review", "approval", `issue_refund {"amount":4800,"currency":"","orderId":"o-1"} → {"amount":400,"currency":"","orderId":"o-1"}`, "reason: partial refund", "→ completed"},
		"refused":         {"invalid_answer: ", "/amount: must be <= 4800", "- "},
		"for role":        {"interrupted", `issue_refund {"amount":4800`, "for role supervisor", "deadline "},
		"verify_identity": {"question"},
	} {
		l := lineOf(out, s)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("the %s line does not say %q: %q", s, w, l)
			}
		}
	}

	recs, raw := auditJSON(t, url, "r-a")
	if len(recs) != 4 {
		t.Fatalf("audit --json: %d records", len(recs))
	}
	for i, r := range raw {
		if sum, err := protocol.CanonicalHash(r); err != nil || sum != recs[i]["hash"] {
			t.Errorf("record %d of --json: hash %v, recomputed %s (%v)", i, recs[i]["hash"], sum, err)
		}
	}
	head := recs[3]["hash"].(string)
	if recs[3]["action"] != "edited" || recs[3]["seq"] != 3.0 || recs[2]["side"] != true {
		t.Fatalf("records: %v", recs)
	}
	kid := testKey(t).ID

	out, _, err = run(t, url, "audit", "verify", "refund", "r-a")
	if want := "audit chain of refund r-a intact: 3 records (1 refusal), all signed with key " + kid + " (published), head " + head + "\n"; err != nil || out != want {
		t.Fatalf("verify: %v\n%q, want %q", err, out, want)
	}
	out, _, err = run(t, url, "audit", "verify", "refund", "r-a", "--json")
	var rep client.AuditReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.Intact || rep.Records != 3 || !rep.HeadCompared {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}

	// A record appended by hand, well formed and chained onto the last: it
	// is unsigned, and the checkpoint's head does not count it.
	forge(t, js, "r-a", 4, head)
	out, _, err = run(t, url, "audit", "verify", "refund", "r-a")
	if codeOf(err) != exitFailed || !strings.Contains(out, "audit chain of refund r-a NOT VOUCHED FOR: 1 of 5 messages cannot be vouched for, 2 problems; 4 records (1 refusal)") ||
		!strings.Contains(out, "(seq 4, action approved): unsigned: it carries no signature") ||
		!strings.Contains(out, "the chain ends at record 4") || !strings.Contains(out, "but the checkpoint's head is record 3 ("+head[:16]) ||
		!strings.Contains(out, "records after 3 were not written by Interlock") {
		t.Fatalf("verify of a forged record: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	out, _, err = run(t, url, "audit", "verify", "refund", "r-a", "--json")
	if codeOf(err) != exitFailed || json.Unmarshal([]byte(out), &rep) != nil || rep.Intact || len(rep.Unvouched) != 1 ||
		!slices.Equal(rep.Unvouched[0].Checks, []string{client.CheckUnsigned, client.CheckHead}) || rep.Unvouched[0].Record != 4 || rep.Vouched != 4 {
		t.Fatalf("verify --json of a forged record: exit %d\n%s", codeOf(err), out)
	}
	out, _, err = run(t, url, "audit", "refund", "r-a")
	if l := lineOf(out, "mallory"); err != nil || !strings.HasPrefix(l, "!") || !strings.Contains(l, " UNVOUCHED ") ||
		!strings.Contains(l, "claims approved by mallory (seq 4); not vouched for: unsigned, after the checkpoint's head") ||
		!strings.Contains(out, "1 message marked ! cannot be vouched for: it is no part of the run's history. `interlock audit verify refund r-a` says why.") {
		t.Fatalf("audit after the forgery: %v\n%s", err, out)
	}
	if got := auditActions(t, out); !slices.Equal(got, []string{"started", "interrupted", "answered", "interrupted", "refused", "edited", "UNVOUCHED"}) {
		t.Fatalf("actions after the forgery %v:\n%s", got, out)
	}

	// Unknown runs.
	_, _, err = run(t, url, "audit", "refund", "r-never")
	if codeOf(err) != exitRefused || !strings.Contains(err.Error(), "there is no run r-never of flow refund") {
		t.Fatalf("audit of an unknown run: exit %d: %v", codeOf(err), err)
	}
	_, _, err = run(t, url, "audit", "verify", "refund", "r-never")
	if codeOf(err) != exitRefused {
		t.Fatalf("verify of an unknown run: exit %d: %v", codeOf(err), err)
	}
}

// TestAuditVerifyNamesAForgedPrev forges a record whose prev names no
// record of the chain, and checks that verify names it.
func TestAuditVerifyNamesAForgedPrev(t *testing.T) {
	url, js := refundServer(t)
	startRefund(t, url, "r-b", 4800)
	// Flags may come before the command, boolean ones too.
	var stdout, stderr strings.Builder
	err := Run(t.Context(), []string{"--approve", "answer", "refund", "r-b", "--approver", "sam", "--nats-url", url}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "completed") {
		t.Fatalf("approve: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if r, _ := completedState(t, stdout.String())["refund"].(map[string]any); r["amount"] != 4800.0 || r["approvedBy"] != "sam" {
		t.Fatalf("refund after approval: %v", r)
	}
	out, _, err := run(t, url, "audit", "verify", "refund", "r-b")
	if err != nil || !strings.Contains(out, "intact: 3 records (0 refusals)") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	list, _ := auditJSON(t, url, "r-b")
	if len(list) != 3 {
		t.Fatalf("audit --json: %d records", len(list))
	}
	head := list[2]["hash"].(string)

	wrong := strings.Repeat("deadbeef", 8)
	forge(t, js, "r-b", 4, wrong)
	out, _, err = run(t, url, "audit", "verify", "refund", "r-b")
	prev := regexp.MustCompile(`record at stream seq \d+ \(seq 4, action approved\): prev names deadbeefdeadbeef…, but the record before it \(seq 3, stream seq \d+\) has hash ` + head[:16] + `…`)
	if codeOf(err) != exitFailed || !prev.MatchString(out) || !strings.Contains(out, "NOT VOUCHED FOR: 1 of 4 messages cannot be vouched for, 2 problems") {
		t.Fatalf("verify of a forged prev: exit %d (%v)\n%s", codeOf(err), err, out)
	}
}

// auditJSON runs `interlock audit refund <id> --json` and returns the
// records, decoded and as stored, checking that the verifier vouches for
// each.
func auditJSON(t *testing.T, url, id string) ([]map[string]any, []json.RawMessage) {
	t.Helper()
	out, _, err := run(t, url, "audit", "refund", id, "--json")
	var msgs []struct {
		StreamSeq uint64          `json:"streamSeq"`
		Vouched   bool            `json:"vouched"`
		Checks    []string        `json:"checks"`
		Record    json.RawMessage `json:"record"`
	}
	if err != nil || json.Unmarshal([]byte(out), &msgs) != nil {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	var recs []map[string]any
	var raw []json.RawMessage
	for _, m := range msgs {
		var r map[string]any
		if !m.Vouched || m.StreamSeq == 0 || json.Unmarshal(m.Record, &r) != nil {
			t.Fatalf("audit --json: message %+v", m)
		}
		recs, raw = append(recs, r), append(raw, m.Record)
	}
	return recs, raw
}

// testKey is the audit key of the test services: the one natstest's
// secret derives.
func testKey(t *testing.T) engine.AuditPublicKey {
	t.Helper()
	k, err := engine.AuditKeyOf(natstest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAuditMarksWhatItCannotVouchFor publishes, with the workers' rights,
// the side record a security review forged (an approval by the CEO naming
// the run's head) and a one-record chain for a run that never existed,
// and checks that verify reports them and exits 1, and that the listing
// marks them instead of showing them as decisions.
func TestAuditMarksWhatItCannotVouchFor(t *testing.T) {
	url, js := refundServer(t)
	startRefund(t, url, "r-s", 4800)
	recs, _ := auditJSON(t, url, "r-s")
	head := recs[len(recs)-1]["hash"].(string)
	names := wire.Names{Prefix: wire.DefaultPrefix}
	natstest.Publish(t, js, names.Audit("refund", "r-s"), protocol.AuditType("approved"), "r-s",
		map[string]any{"action": "approved", "by": "ceo@example.com", "side": true, "prev": head})

	out, _, err := run(t, url, "audit", "verify", "refund", "r-s")
	if codeOf(err) != exitFailed || !strings.Contains(out, "NOT VOUCHED FOR: 1 of 3 messages cannot be vouched for") ||
		!strings.Contains(out, "side record at stream seq ") || !strings.Contains(out, "a side record of action approved: only refusals hang off the chain") ||
		!strings.Contains(out, "(action approved): unsigned") {
		t.Fatalf("verify of a forged side record: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	out, _, err = run(t, url, "audit", "refund", "r-s")
	l := lineOf(out, "ceo@example.com")
	if f := strings.Fields(l); err != nil || len(f) < 3 || f[0] != "!" || f[1] != "-" || f[2] != "UNVOUCHED" ||
		!strings.Contains(l, "claims approved by ceo@example.com (side record); not vouched for: not a record of this run, malformed, altered, unsigned, a side record that is no refusal") {
		t.Fatalf("audit of a forged side record: %v\n%s", err, out)
	}
	if slices.Contains(auditActions(t, out), "approved") {
		t.Fatalf("the listing shows the forged approval as a decision:\n%s", out)
	}

	// A run that never existed: one record, chained as Interlock chains.
	rec := map[string]any{"flow": "refund", "run": "r-ghost", "action": "approved", "at": time.Now().UTC().Format(time.RFC3339Nano),
		"by": "ceo@example.com", "node": "review", "kind": "approval", "seq": 1, "outcome": map[string]any{"status": "completed"}}
	b, _ := json.Marshal(rec)
	if rec["hash"], err = protocol.CanonicalHash(b); err != nil {
		t.Fatal(err)
	}
	natstest.Publish(t, js, names.Audit("refund", "r-ghost"), protocol.AuditType("approved"), "r-ghost", rec)
	out, _, err = run(t, url, "audit", "verify", "refund", "r-ghost")
	if codeOf(err) != exitFailed || !strings.Contains(out, "NOT VOUCHED FOR: 1 of 1 messages cannot be vouched for") ||
		!strings.Contains(out, "(seq 1, action approved): unsigned") || !strings.Contains(out, "a run that never existed has none") {
		t.Fatalf("verify of a forged run: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	out, _, err = run(t, url, "audit", "refund", "r-ghost", "--json")
	var msgs []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &msgs) != nil || len(msgs) != 1 || msgs[0]["vouched"] != false {
		t.Fatalf("audit --json of a forged run: %v\n%s", err, out)
	}
}

// TestAuditKeyPrintsThePublishedKeyAndVerifyPinsOne reads the key the
// workers published, pins it, and pins another.
func TestAuditKeyPrintsThePublishedKeyAndVerifyPinsOne(t *testing.T) {
	url, _ := refundServer(t)
	startRefund(t, url, "r-k", 900)
	key := testKey(t)

	out, _, err := run(t, url, "audit", "key")
	if err != nil || !regexp.MustCompile(`(?m)^`+key.ID+` +`+regexp.QuoteMeta(key.String())+` +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(out) ||
		!strings.Contains(out, "interlock audit verify --key "+key.String()+" <flow> <run>") {
		t.Fatalf("audit key: %v\n%s", err, out)
	}
	out, _, err = run(t, url, "audit", "key", "--json")
	var keys []protocol.AuditKey
	if err != nil || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || keys[0].Kid != key.ID || keys[0].PublicKey != key.String() {
		t.Fatalf("audit key --json: %v\n%s", err, out)
	}

	out, _, err = run(t, url, "audit", "verify", "refund", "r-k", "--key", key.String())
	if err != nil || !strings.Contains(out, "intact: 2 records (0 refusals), all signed with key "+key.ID+" (pinned)") {
		t.Fatalf("verify with the key pinned: %v\n%s", err, out)
	}
	other, err := engine.AuditKeyOf([]byte("another-secret-another-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, url, "audit", "verify", "refund", "r-k", "--key", other.ID+":"+other.String())
	if codeOf(err) != exitFailed || !strings.Contains(out, "NOT VOUCHED FOR: 2 of 2 messages cannot be vouched for") ||
		!strings.Contains(out, "signed with key "+key.ID+", which is not the pinned key ("+other.ID+")") {
		t.Fatalf("verify with another key pinned: exit %d (%v)\n%s", codeOf(err), err, out)
	}
	out, _, err = run(t, url, "audit", "refund", "r-k", "--key", other.String())
	if err != nil || strings.Count(out, "UNVOUCHED") != 2 || !strings.Contains(out, "not vouched for: signed with an unknown key") {
		t.Fatalf("audit with another key pinned: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"audit", "verify", "refund", "r-k", "--key", "not-a-key"},
		{"audit", "key", "--key", key.String()},
		{"audit", "key", "extra"},
	} {
		if _, _, err := run(t, url, args...); codeOf(err) != exitUsage {
			t.Errorf("%q: exit %d (%v), want a usage error", args, codeOf(err), err)
		}
	}
}

// TestAnswerDecidesApprovals rejects refunds, with and without a reason,
// and checks the usage errors of decisions sent to the wrong interrupt.
func TestAnswerDecidesApprovals(t *testing.T) {
	url, _ := refundServer(t)

	startRefund(t, url, "r-c", 4800)
	if out, _, err := run(t, url, "pending", "--flow", "refund"); err != nil || !strings.Contains(lineOf(out, "r-c"), "an approval of issue_refund for role supervisor") {
		t.Fatalf("pending: %v\n%s", err, out)
	}
	if out, _, err := run(t, url, "pending", "--kind", "approval", "--role", "supervisor", "--newest"); err != nil || !strings.Contains(lineOf(out, "r-c"), "an approval of issue_refund for role supervisor") || !strings.Contains(out, "before the kind and role filters") {
		t.Fatalf("pending --kind approval --role supervisor: %v\n%s", err, out)
	}
	if out, _, err := run(t, url, "pending", "--role", "legal"); err != nil || strings.Contains(out, "r-c") {
		t.Fatalf("pending --role legal: %v\n%s", err, out)
	}
	if _, _, err := run(t, url, "pending", "--kind", "vote"); codeOf(err) != exitUsage {
		t.Fatalf("pending --kind vote: %v, want a usage error", err)
	}
	out, errOut, err := run(t, url, "answer", "refund", "r-c", "--reject", "--reason", "not eligible", "--approver", "sam")
	if err != nil || errOut != "" {
		t.Fatalf("reject: %v\n%s%s", err, out, errOut)
	}
	state := completedState(t, out)
	if rej, _ := state["rejection"].(map[string]any); state["outcome"] != "rejected" || state["refund"] != nil || rej["approver"] != "sam" || rej["reason"] != "not eligible" {
		t.Fatalf("state after rejection: %v", state)
	}
	if out, _, err := run(t, url, "audit", "refund", "r-c"); err != nil || !strings.Contains(lineOf(out, "rejected"), "reason: not eligible") {
		t.Fatalf("audit of a rejection: %v\n%s", err, out)
	}

	// The refund's approval takes a reason on reject: one without is
	// refused, here as on every surface, and the run still waits.
	startRefund(t, url, "r-d", 900)
	_, _, err = run(t, url, "answer", "refund", "r-d", "--reject")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "a reject of issue_refund needs a reason") || !strings.Contains(err.Error(), "--reject --reason TEXT") {
		t.Fatalf("reject without a reason: exit %d: %v", codeOf(err), err)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-d", "--reject", "--reason", "duplicate")
	if err != nil || errOut != "" || completedState(t, out)["outcome"] != "rejected" {
		t.Fatalf("reject with a reason: %v\n%s%s", err, out, errOut)
	}

	// Decisions sent to a question, and answers sent to an approval.
	if out, _, err := run(t, url, "start", "refund", "--run", "r-e", "orderId=o-2", "amount:=700"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	_, _, err = run(t, url, "answer", "refund", "r-e", "--approve")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "run r-e of flow refund waits on a question for last4: this interrupt asks questions; send answers for last4; answer with interlock answer refund r-e last4=...") {
		t.Fatalf("--approve on a question: exit %d: %v", codeOf(err), err)
	}
	if _, _, err := run(t, url, "answer", "refund", "r-e", "last4=4321"); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, url, "answer", "refund", "r-e", "amount=3")
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "run r-e of flow refund waits on an approval of issue_refund for role supervisor: this interrupt is an approval of issue_refund; send decision (approve, edit, reject); decide with interlock answer refund r-e --approve, or interlock answer refund r-e --edit amount=..., or interlock answer refund r-e --reject --reason TEXT") {
		t.Fatalf("answers to an approval: exit %d: %v", codeOf(err), err)
	}
	out, errOut, err = run(t, url, "answer", "refund", "r-e", "--edit", "amount=650", "--edit", "currency=EUR", "--approver", "ann")
	if err != nil {
		t.Fatalf("edit of two args: %v\n%s%s", err, out, errOut)
	}
	if r, _ := completedState(t, out)["refund"].(map[string]any); r["amount"] != 650.0 || r["approvedBy"] != "ann" {
		t.Fatalf("refund after the edit: %v", r)
	}
	if out, _, err := run(t, url, "audit", "refund", "r-e"); err != nil || !strings.Contains(lineOf(out, "edited"), `{"amount":650,"currency":"EUR","orderId":"o-2"}`) {
		t.Fatalf("audit of the edit: %v\n%s", err, out)
	}
}

func TestEditValuesFollowTheProposedArgs(t *testing.T) {
	t.Parallel()
	proposed := json.RawMessage(`{"amount":4800,"orderId":"123","currency":"","note":null}`)
	cases := []struct {
		args    []string
		want    map[string]string
		wantErr string
	}{
		{args: []string{"amount=400"}, want: map[string]string{"amount": "400"}},
		{args: []string{"orderId=124"}, want: map[string]string{"orderId": `"124"`}},
		{args: []string{"currency=EUR", "note=true"}, want: map[string]string{"currency": `"EUR"`, "note": "true"}},
		{args: []string{"note=checked with finance"}, want: map[string]string{"note": `"checked with finance"`}},
		{args: []string{"orderId:=124", "amount:=\"400\""}, want: map[string]string{"orderId": "124", "amount": `"400"`}},
		{args: []string{"amount:=four"}, wantErr: "the value after := must be JSON"},
		{args: []string{"amount"}, wantErr: `--edit "amount" is not field=value or field:=JSON`},
		{args: []string{"amount=four hundred"}, wantErr: `--edit amount=four hundred: amount is a number: "four hundred" is not a number`},
		{args: []string{"amount=12.5"}, want: map[string]string{"amount": "12.5"}},
	}
	for _, tc := range cases {
		as, err := parseAssignments("--edit", tc.args)
		var got map[string]json.RawMessage
		if err == nil {
			r := protocol.Resume{}
			err = typedValues(&r, nil, as, protocol.Interrupted{Args: proposed})
			got = r.Edits
		}
		if tc.wantErr != "" {
			if codeOf(err) != exitUsage || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want a usage error saying %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %v, %v", tc.args, got, err)
			continue
		}
		for k, v := range tc.want {
			if string(got[k]) != v {
				t.Errorf("%q: %s = %s, want %s", tc.args, k, got[k], v)
			}
		}
	}
}

// TestAuditShowsEveryPauseOnceWhicheverWayTheChainRecordedIt lists a
// chain that records a pause in the outcome of the transition's record
// and one written before, with a separate interrupted record, and checks
// that each shows the pause on one line: the folded one marked as part of
// the record above it, with what the run waits for.
func TestAuditShowsEveryPauseOnceWhicheverWayTheChainRecordedIt(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	expires := at.Add(time.Hour)
	approval := &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"amount":4800}`)}
	started := protocol.AuditRecord{Flow: "refund", Run: "r-1", Action: protocol.ActionStarted, At: at, By: "/agents/refunds", Seq: 1,
		Outcome: &protocol.AuditOutcome{Status: protocol.StatusWaiting, Node: "review", RequestID: "rq_1", Kind: protocol.KindApproval}}
	expired := func(seq uint64) protocol.AuditRecord {
		return protocol.AuditRecord{Flow: "refund", Run: "r-1", Action: protocol.ActionExpired, At: expires, By: "interlock/timeout",
			Node: "review", RequestID: "rq_1", Kind: protocol.KindApproval, Seq: seq, Outcome: &protocol.AuditOutcome{Status: protocol.StatusExpired}}
	}
	folded := started
	o := *started.Outcome
	o.ApproverRole, o.ExpiresAt, o.Reason, o.Approval = "supervisor", &expires, "over $500", approval
	folded.Outcome = &o
	interrupted := protocol.AuditRecord{Flow: "refund", Run: "r-1", Action: protocol.ActionInterrupted, At: at, By: "interlock/host-1",
		Node: "review", RequestID: "rq_1", Kind: protocol.KindApproval, ApproverRole: "supervisor", ExpiresAt: &expires, Reason: "over $500",
		Approval: approval, Seq: 2}
	deadline := expires.Local().Format(time.DateTime)
	for name, recs := range map[string][]protocol.AuditRecord{
		"folded": {folded, expired(2)},
		"before": {started, interrupted, expired(3)},
	} {
		entries := make([]client.AuditEntry, len(recs))
		for i, r := range recs {
			entries[i] = client.AuditEntry{StreamSeq: uint64(i + 1), Record: r, Vouched: true}
		}
		var out strings.Builder
		if err := printAudit(&out, entries); err != nil {
			t.Fatal(err)
		}
		if got := auditActions(t, out.String()); !slices.Equal(got, []string{"started", "interrupted", "expired"}) {
			t.Errorf("%s chain: actions %v, want started, interrupted, expired:\n%s", name, got, out.String())
		}
		l := lineOf(out.String(), " interrupted ")
		for _, want := range []string{`issue_refund {"amount":4800}`, "for role supervisor", "deadline " + deadline, "reason: over $500"} {
			if !strings.Contains(l, want) {
				t.Errorf("%s chain: the pause's line does not say %q: %q", name, want, l)
			}
		}
		if marked := strings.HasPrefix(l, "↳"); marked != (name == "folded") {
			t.Errorf("%s chain: the pause's line %q is marked as part of the record above: %t", name, l, marked)
		}
		if l := lineOf(out.String(), " expired "); !strings.Contains(l, "deadline "+deadline+" passed") {
			t.Errorf("%s chain: the expiry does not name the deadline the pause set: %q", name, l)
		}
	}
}

// The command line decides as its user: --as, else $INTERLOCK_AS, else
// the login name; never as the process's source (it was /cli, which
// landed in a refund's approvedBy).
func TestTheCommandLineDecidesAsItsUser(t *testing.T) {
	url, _ := refundServer(t)
	t.Setenv("INTERLOCK_AS", "dana")
	startRefund(t, url, "r-as", 900)
	out, errOut, err := run(t, url, "answer", "refund", "r-as", "--approve")
	if err != nil {
		t.Fatalf("approve: %v\n%s%s", err, out, errOut)
	}
	if r, _ := completedState(t, out)["refund"].(map[string]any); r["approvedBy"] != "dana" {
		t.Fatalf("approvedBy %v with INTERLOCK_AS=dana, want dana\n%s", r["approvedBy"], out)
	}
	t.Setenv("INTERLOCK_AS", "")
	login := loginName()
	if login == "" {
		t.Skip("this machine names no user")
	}
	startRefund(t, url, "r-login", 900)
	out, errOut, err = run(t, url, "answer", "refund", "r-login", "--approve")
	if err != nil {
		t.Fatalf("approve: %v\n%s%s", err, out, errOut)
	}
	if r, _ := completedState(t, out)["refund"].(map[string]any); r["approvedBy"] != login {
		t.Fatalf("approvedBy %v, want the login name %s\n%s", r["approvedBy"], login, out)
	}
}

// From the shell as everywhere: an approver votes once, and whoever
// started the run votes not at all.
func TestFromTheShellEachApproverVotesOnceAndTheStarterNotAtAll(t *testing.T) {
	t.Parallel()
	url, _ := refundServer(t)
	if _, errOut, err := run(t, url, "start", "refund", "--run", "r-q", "--as", "ray", "orderId=o-1", "amount:=12000", "last4=1234"); err != nil {
		t.Fatalf("start: %v\n%s", err, errOut)
	}
	_, errOut, err := run(t, url, "answer", "refund", "r-q", "--approve", "--role", "supervisor", "--as", "ray")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "ray started run r-q and may not vote") {
		t.Fatalf("the starter's vote: exit %d (%v) %q", codeOf(err), err, errOut)
	}
	if out, errOut, err := run(t, url, "answer", "refund", "r-q", "--approve", "--role", "supervisor", "--as", "sam"); err != nil || !strings.Contains(out, "waiting") {
		t.Fatalf("sam's vote: %v\n%s%s", err, out, errOut)
	}
	_, errOut, err = run(t, url, "answer", "refund", "r-q", "--approve", "--role", "finance_lead", "--as", "sam")
	if codeOf(err) != exitRefused || !strings.Contains(errOut, "sam voted on issue_refund already") {
		t.Fatalf("sam's second vote: exit %d (%v) %q", codeOf(err), err, errOut)
	}
}

// TestAuditSaysWhatAMigrationMoved: a migrated record's line names the
// versions, and the node when it was renamed.
func TestAuditSaysWhatAMigrationMoved(t *testing.T) {
	t.Parallel()
	rec := protocol.AuditRecord{Action: protocol.ActionMigrated, Node: "approve", Migration: &protocol.AuditMigration{From: "1", To: "2", Node: "review"}}
	if got, want := auditDetails(rec, nil), "version 1 → 2; node review → approve"; got != want {
		t.Errorf("details %q, want %q", got, want)
	}
	rec.Migration.Node = "approve"
	if got, want := auditDetails(rec, nil), "version 1 → 2"; got != want {
		t.Errorf("details %q, want %q", got, want)
	}
}
