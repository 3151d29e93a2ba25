package client

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
)

// TestAuditHashIsTheEngines checks that the client's hash of a record, as
// published, is the engine's, for records with numbers as written, HTML
// characters, non-ASCII text, nested args and every optional part.
func TestAuditHashIsTheEngines(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 30, 0, 123456789, time.UTC)
	expires := at.Add(30 * time.Minute)
	recs := []*engine.AuditRecord{
		{Flow: "refund", Run: "r-1", Action: engine.ActionStarted, At: at, By: "/cli", EventID: "e-1", Seq: 1},
		{
			Flow: "refund", Run: "r-1", Action: engine.ActionInterrupted, At: at, Node: "review", Kind: engine.KindApproval,
			ApproverRole: "supervisor", ExpiresAt: &expires, Reason: "Refund exceeds $500 <threshold> & more",
			Approval: &engine.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"orderId":"o-1","amount":4800.50,"big":1e21,"nested":{"z":[1,2.0,"é"],"a":null}}`)},
			Seq:      4, Prev: strings.Repeat("ab", 32),
		},
		{
			Flow: "refund", Run: "r-1", Action: engine.ActionEdited, At: at, By: "sam — ünïcode", Trusted: true, Timeout: true,
			Approval: &engine.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"amount":4800}`), Edits: json.RawMessage(`{"amount":400}`), Final: json.RawMessage(`{"amount":400}`)},
			Outcome:  &engine.AuditOutcome{Status: engine.Completed, Node: "issue_refund"}, Seq: 5, Prev: strings.Repeat("cd", 32),
			Kid: "5b0e7c1d9a3f2e48", Sig: "clpjrTcumzryd6QmYoQn1ct4dbvs5L/5P6zMtaM4qvze+85uW/mtjnFWThsiekFjKiLBKxYVOEA5/DCu8qKenw==",
		},
		{Flow: "refund", Run: "r-1", Action: engine.ActionRefused, At: at, Code: "invalid_answer", Reason: "amount 9000.00 is more than the 4800.00 asked for", Side: true, Prev: strings.Repeat("ef", 32)},
	}
	for _, rec := range recs {
		want, err := engine.AuditHash(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Hash = want
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		// As published: inside a structured CloudEvent, read back.
		ev, err := events.New("id-1", "/t", events.AuditType(rec.Action), rec.Run, at, json.RawMessage(data))
		if err != nil {
			t.Fatal(err)
		}
		body, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := events.Decode(map[string][]string{"Content-Type": {events.Structured}}, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{data, back.Data()} {
			got, err := AuditHash(b)
			if err != nil || got != want {
				t.Errorf("%s record: client hash %s (%v), engine %s\n%s", rec.Action, got, err, want, b)
			}
			if c, err := engine.CanonicalHash(b); err != nil || c != want {
				t.Errorf("%s record: engine.CanonicalHash %s (%v), AuditHash %s", rec.Action, c, err, want)
			}
		}
	}
	for _, bad := range []string{``, `null`, `[1]`, `"x"`, `{`} {
		if _, err := AuditHash([]byte(bad)); err == nil {
			t.Errorf("AuditHash(%q) = nil error", bad)
		}
	}
}

// chain builds a run's audit entries as the engine writes them.
type chain struct {
	t       *testing.T
	head    string
	n       uint64
	entries []auditEntry
}

func newChain(t *testing.T) *chain { return &chain{t: t} }

var chainStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// add appends a chained record with action (and outcome status, if any).
func (c *chain) add(action, status string) *chain {
	c.n++
	rec := &engine.AuditRecord{
		Flow: "refund", Run: "r-1", Action: action, At: chainStart.Add(time.Duration(c.n) * time.Minute),
		By: "/cli", Seq: c.n, Prev: c.head,
	}
	if status != "" {
		rec.Outcome = &engine.AuditOutcome{Status: engine.Status(status)}
	}
	c.head = c.put(rec)
	return c
}

// refusal appends a side record naming the current head.
func (c *chain) refusal() *chain {
	c.put(&engine.AuditRecord{
		Flow: "refund", Run: "r-1", Action: engine.ActionRefused, At: chainStart, Code: "invalid_answer",
		Reason: "no", Side: true, Prev: c.head,
	})
	return c
}

func (c *chain) put(rec *engine.AuditRecord) string {
	c.t.Helper()
	h, err := engine.AuditHash(rec)
	if err != nil {
		c.t.Fatal(err)
	}
	rec.Hash = h
	c.entries = append(c.entries, entryOf(c.t, uint64(10+len(c.entries)), rec))
	return h
}

func entryOf(t *testing.T, streamSeq uint64, rec any) auditEntry {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := events.DecodeAuditRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	r.StreamSeq, r.EventType = streamSeq, events.AuditType(r.Action)
	return auditEntry{streamSeq: streamSeq, rec: r}
}

// refundChain is a refund run's records: started, a question answered, an
// approval, a refused edit and an edit that completed the run.
func refundChain(t *testing.T) *chain {
	return newChain(t).add("started", "").add("interrupted", "").add("answered", "").add("interrupted", "").
		refusal().add("edited", "completed")
}

func (c *chain) head5() chainHead {
	return chainHead{found: true, head: &events.AuditHead{Records: c.n, Hash: c.head}}
}

// alter returns entries with the record at i changed by f (its hash kept).
func alter(t *testing.T, entries []auditEntry, i int, f func(map[string]any)) []auditEntry {
	t.Helper()
	out := slices.Clone(entries)
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(out[i].rec.Data)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	e := entryOf(t, out[i].streamSeq, m)
	out[i] = e
	return out
}

func TestCheckChain(t *testing.T) {
	t.Parallel()
	good := refundChain(t)
	head := good.head5()
	forged := refundChain(t)
	forged.add("approved", "")
	hashOf := func(e auditEntry) string { return e.rec.Hash }

	reused := refundChain(t)
	second := newChain(t).add("started", "").add("interrupted", "")
	for _, e := range second.entries {
		e.streamSeq += 100
		e.rec.StreamSeq = e.streamSeq
		reused.entries = append(reused.entries, e)
	}

	cases := []struct {
		name      string
		entries   []auditEntry
		head      chainHead
		dropped   bool
		wantCheck []string // checks of the problems, in order; none when intact
		wantMsg   string   // in the first problem's message
		wantNote  string
		records   int
		refusals  int
	}{
		{name: "intact", entries: good.entries, head: head, records: 5, refusals: 1},
		{
			name: "no checkpoint", entries: good.entries, head: chainHead{}, records: 5, refusals: 1,
			wantNote: "the head could not be compared",
		},
		{
			name: "no head in the checkpoint", entries: good.entries, head: chainHead{found: true}, records: 5, refusals: 1,
			wantNote: "records no audit head",
		},
		{
			name: "altered record", head: head, records: 5, refusals: 1,
			entries:   alter(t, good.entries, 2, func(m map[string]any) { m["by"] = "mallory" }),
			wantCheck: []string{CheckHash}, wantMsg: "record at stream seq 12 (seq 3, action answered): hash does not match its contents — the record was altered",
		},
		{
			name: "forged record after the head", entries: forged.entries, head: head, records: 6, refusals: 1,
			wantCheck: []string{CheckHead},
			wantMsg:   "the chain ends at record 6 (stream seq 16, action approved) but the checkpoint's head is record 5 (" + short(good.head) + "): records after 5 were not written by Interlock",
		},
		{
			name: "wrong prev", head: head, records: 5, refusals: 1,
			entries: alter(t, good.entries, 3, func(m map[string]any) {
				m["prev"] = strings.Repeat("0", 64)
				delete(m, "hash")
				b, _ := json.Marshal(m)
				m["hash"], _ = AuditHash(b)
			}),
			// The altered record 4 is re-hashed, so record 5 no longer names it.
			wantCheck: []string{CheckPrev, CheckPrev, CheckPrev},
			wantMsg:   "record at stream seq 13 (seq 4, action interrupted): prev names 0000000000000000…, but the record before it (seq 3, stream seq 12) has hash " + short(hashOf(good.entries[2])),
		},
		{
			name: "a record missing", head: head, records: 4, refusals: 1,
			entries:   slices.Delete(slices.Clone(good.entries), 2, 3),
			wantCheck: []string{CheckSeq, CheckPrev}, wantMsg: "record at stream seq 13 (seq 4, action interrupted): expected seq 3 after record 2 (stream seq 11)",
		},
		{
			name: "older records aged out", head: head, dropped: true, records: 3, refusals: 1,
			entries: good.entries[2:], wantNote: "the chain starts at record 3 (stream seq 12): records 1 to 2 have aged out",
		},
		{
			name: "chain starts late but nothing aged out", head: head, records: 3, refusals: 1,
			entries: good.entries[2:], wantCheck: []string{CheckMissing}, wantMsg: "has dropped no message: records 1 to 2 were never in it",
		},
		{
			name: "refusal before the first record left", head: head, dropped: true, records: 1, refusals: 1,
			entries: good.entries[4:], wantNote: "the chain starts at record 5",
		},
		{
			name: "records not yet published", head: chainHead{found: true, head: &events.AuditHead{Records: 7, Hash: "ff"}}, records: 5, refusals: 1,
			entries: good.entries, wantCheck: []string{CheckMissing}, wantMsg: "the stream holds records only up to 5: records 6 to 7 are missing",
		},
		{
			name: "head replaced", head: chainHead{found: true, head: &events.AuditHead{Records: 5, Hash: strings.Repeat("1", 64)}}, records: 5, refusals: 1,
			entries: good.entries, wantCheck: []string{CheckHead}, wantMsg: "the record was replaced",
		},
		{
			name: "refusal naming no record", head: head, records: 5, refusals: 1,
			entries: alter(t, good.entries, 4, func(m map[string]any) {
				m["prev"] = strings.Repeat("9", 64)
				delete(m, "hash")
				b, _ := json.Marshal(m)
				m["hash"], _ = AuditHash(b)
			}),
			wantCheck: []string{CheckPrev}, wantMsg: "refusal at stream seq 14 (action refused): prev names 9999999999999999…, which is no record of the chain before it",
		},
		{
			name: "record of another run", head: head, records: 5, refusals: 1,
			entries:   alter(t, good.entries, 1, func(m map[string]any) { m["run"] = "r-2" }),
			wantCheck: []string{CheckRecord, CheckHash}, wantMsg: "names run r-2 of flow refund, not run r-1 of flow refund",
		},
		{
			name: "wrong event type", head: head, records: 5, refusals: 1,
			entries: func() []auditEntry {
				es := slices.Clone(good.entries)
				es[0].rec.EventType = "io.interlock.audit.approved"
				return es
			}(),
			wantCheck: []string{CheckType}, wantMsg: "came as a CloudEvent of type io.interlock.audit.approved, not io.interlock.audit.started",
		},
		{
			name: "not a record", head: head, records: 5, refusals: 1,
			entries:   append(slices.Clone(good.entries), auditEntry{streamSeq: 99, err: errNotARecord}),
			wantCheck: []string{CheckRecord}, wantMsg: "message at stream seq 99 is not an audit record",
		},
		{
			name: "a repeated publish", head: head, records: 5, refusals: 1,
			entries:  append(slices.Clone(good.entries), good.entries[5]),
			wantNote: "record 5 is in the stream twice",
		},
		{
			name: "run id used again", entries: reused.entries, head: second.head5(), records: 7, refusals: 1,
			wantNote: "the run id was used again",
		},
		{
			name: "a second chain before the run ended", head: second.head5(), records: 4,
			entries:   append(slices.Clone(second.entries), second.entries[0], second.entries[1]),
			wantCheck: []string{CheckSeq, CheckPrev}, wantMsg: "expected seq 3 after record 2",
		},
		{name: "nothing in the stream", head: head, wantCheck: []string{CheckMissing}, wantMsg: "holds no record of the run"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := checkChain("refund", "r-1", "INTERLOCK_AUDIT", tc.entries, tc.head, tc.dropped)
			var checks []string
			for _, p := range rep.Problems {
				checks = append(checks, p.Check)
			}
			if !slices.Equal(checks, tc.wantCheck) || rep.Intact != (len(tc.wantCheck) == 0) {
				t.Fatalf("intact %v, problems %v, want %v:\n%s", rep.Intact, checks, tc.wantCheck, messages(rep))
			}
			if tc.wantMsg != "" && !strings.Contains(rep.Problems[0].Message, tc.wantMsg) {
				t.Errorf("first problem %q does not say %q", rep.Problems[0].Message, tc.wantMsg)
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(rep.Notes, "\n"), tc.wantNote) {
				t.Errorf("notes %q do not say %q", rep.Notes, tc.wantNote)
			}
			if rep.Records != tc.records || rep.Refusals != tc.refusals {
				t.Errorf("%d records, %d refusals; want %d, %d", rep.Records, rep.Refusals, tc.records, tc.refusals)
			}
		})
	}
	rep := checkChain("refund", "r-1", "INTERLOCK_AUDIT", good.entries, head, false)
	if rep.Head.Records != 5 || rep.Head.Hash != good.head || !rep.HeadCompared || rep.FirstRecord != 1 {
		t.Errorf("intact report: %+v", rep)
	}
}

var errNotARecord = &events.Error{Reason: events.ReasonInvalidPayload, Msg: "not a CloudEvent"}

func messages(rep AuditReport) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		b.WriteString("  " + p.Message + "\n")
	}
	for _, n := range rep.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	return b.String()
}
