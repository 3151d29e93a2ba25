package client

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// TestAuditHashIsTheEngines checks that the client's hash of a record, as
// published, is the engine's, for records with numbers as written, HTML
// characters, non-ASCII text, nested args and every optional part.
func TestAuditHashIsTheEngines(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 30, 0, 123456789, time.UTC)
	expires := at.Add(30 * time.Minute)
	recs := []*protocol.AuditRecord{
		{Flow: "refund", Run: "r-1", Action: protocol.ActionStarted, At: at, By: "/cli", EventID: "e-1", Seq: 1},
		{
			Flow: "refund", Run: "r-1", Action: protocol.ActionInterrupted, At: at, Node: "review", Kind: protocol.KindApproval,
			ApproverRole: "supervisor", ExpiresAt: &expires, Reason: "Refund exceeds $500 <threshold> & more",
			Approval: &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"orderId":"o-1","amount":4800.50,"big":1e21,"nested":{"z":[1,2.0,"é"],"a":null}}`)},
			Seq:      4, Prev: strings.Repeat("ab", 32),
		},
		{
			Flow: "refund", Run: "r-1", Action: protocol.ActionEdited, At: at, By: "sam — ünïcode", Trusted: true, Timeout: true,
			Approval: &protocol.AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"amount":4800}`), Edits: json.RawMessage(`{"amount":400}`), Final: json.RawMessage(`{"amount":400}`)},
			Outcome:  &protocol.AuditOutcome{Status: engine.Completed, Node: "issue_refund"}, Seq: 5, Prev: strings.Repeat("cd", 32),
			Kid: "5b0e7c1d9a3f2e48", Sig: "clpjrTcumzryd6QmYoQn1ct4dbvs5L/5P6zMtaM4qvze+85uW/mtjnFWThsiekFjKiLBKxYVOEA5/DCu8qKenw==",
		},
		{Flow: "refund", Run: "r-1", Action: protocol.ActionRefused, At: at, Code: "invalid_answer", Reason: "amount 9000.00 is more than the 4800.00 asked for", Side: true, Prev: strings.Repeat("ef", 32)},
	}
	for _, rec := range recs {
		want, err := protocol.AuditHash(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Hash = want
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		// As published: inside a structured CloudEvent, read back.
		ev, err := events.New("id-1", "/t", protocol.AuditType(rec.Action), rec.Run, at, json.RawMessage(data))
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
			got, err := protocol.CanonicalHash(b)
			if err != nil || got != want {
				t.Errorf("%s record: client hash %s (%v), engine %s\n%s", rec.Action, got, err, want, b)
			}
			if c, err := protocol.CanonicalHash(b); err != nil || c != want {
				t.Errorf("%s record: protocol.CanonicalHash %s (%v), AuditHash %s", rec.Action, c, err, want)
			}
		}
	}
	for _, bad := range []string{``, `null`, `[1]`, `"x"`, `{`} {
		if _, err := protocol.CanonicalHash([]byte(bad)); err == nil {
			t.Errorf("protocol.CanonicalHash(%q) = nil error", bad)
		}
	}
}

// Keys of the tests: the deployment's (derived from a secret, as the
// workers do) and another.
var (
	deploymentKey = keyOf("0123456789abcdef0123456789abcdef")
	otherKey      = keyOf("fedcba9876543210fedcba9876543210")
)

// testKey is an audit signing key of the tests.
type testKey struct {
	priv ed25519.PrivateKey
	pub  protocol.AuditKey
}

// keyOf derives a signing key from a secret as the engine does; the
// engine's own derivation is pinned by its tests, and the public key here
// is checked against it.
func keyOf(secret string) testKey {
	seed, err := hkdf.Key(sha256.New, []byte(secret), nil, engine.AuditKeyInfo, ed25519.SeedSize)
	if err != nil {
		panic(err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	want, err := engine.AuditKeyOf([]byte(secret))
	if err != nil || !want.Key.Equal(pub) {
		panic(fmt.Sprintf("the tests derive key %x, the engine %x (%v)", pub, want.Key, err))
	}
	return testKey{priv: priv, pub: protocol.AuditKey{Kid: protocol.AuditKeyID(pub), PublicKey: base64.StdEncoding.EncodeToString(pub), Since: chainStart}}
}

// published trusts the deployment's key as the workers publish it.
func published(t *testing.T) trust {
	t.Helper()
	tr, err := newTrust([]protocol.AuditKey{deploymentKey.pub}, false, "interlock_config audit.keys")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// chain builds a run's audit entries as the engine writes them, signed
// with key (unsigned when key is nil).
type chain struct {
	t       *testing.T
	key     *testKey
	head    string
	n       uint64
	entries []auditEntry
}

func newChain(t *testing.T) *chain { return &chain{t: t, key: &deploymentKey} }

var chainStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// signedWith makes the records added from now on signed with k (nil:
// unsigned).
func (c *chain) signedWith(k *testKey) *chain {
	c.key = k
	return c
}

// add appends a chained record with action (and outcome status, if any).
func (c *chain) add(action, status string) *chain {
	c.n++
	rec := &protocol.AuditRecord{
		Flow: "refund", Run: "r-1", Action: action, At: chainStart.Add(time.Duration(c.n) * time.Minute),
		By: "/cli", Seq: c.n, Prev: c.head,
	}
	if status != "" {
		rec.Outcome = &protocol.AuditOutcome{Status: engine.Status(status)}
	}
	c.head = c.put(rec)
	return c
}

// refusal appends a side record naming the current head.
func (c *chain) refusal() *chain {
	return c.side(protocol.ActionRefused)
}

// side appends a side record of action naming the current head.
func (c *chain) side(action string) *chain {
	rec := &protocol.AuditRecord{
		Flow: "refund", Run: "r-1", Action: action, At: chainStart, By: "ceo@example.com", Side: true, Prev: c.head,
	}
	if action == protocol.ActionRefused {
		rec.Code, rec.Reason, rec.By = "invalid_answer", "no", "/cli"
	}
	c.put(rec)
	return c
}

// forge appends a chained record at position seq naming prev, without
// moving the chain's head.
func (c *chain) forge(action string, seq uint64, prev string) *chain {
	c.put(&protocol.AuditRecord{Flow: "refund", Run: "r-1", Action: action, At: chainStart, By: "ceo@example.com", Seq: seq, Prev: prev})
	return c
}

func (c *chain) put(rec *protocol.AuditRecord) string {
	c.t.Helper()
	if c.key != nil {
		c.key.seal(c.t, rec)
	} else {
		h, err := protocol.AuditHash(rec)
		if err != nil {
			c.t.Fatal(err)
		}
		rec.Hash = h
	}
	c.entries = append(c.entries, entryOf(c.t, uint64(10+len(c.entries)), rec))
	return rec.Hash
}

// seal names the key, hashes and signs rec as the engine does.
func (k *testKey) seal(t *testing.T, rec *protocol.AuditRecord) {
	t.Helper()
	rec.Kid, rec.Sig = k.pub.Kid, ""
	h, err := protocol.AuditHash(rec)
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := hex.DecodeString(h)
	rec.Hash, rec.Sig = h, base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, digest))
}

func entryOf(t *testing.T, streamSeq uint64, rec any) auditEntry {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := protocol.DecodeAuditRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	r.StreamSeq, r.EventType = streamSeq, protocol.AuditType(r.Action)
	return auditEntry{streamSeq: streamSeq, rec: r}
}

// refundChain is a refund run's records: started, a question answered, an
// approval, a refused edit and an edit that completed the run.
func refundChain(t *testing.T) *chain {
	return newChain(t).add("started", "").add("interrupted", "").add("answered", "").add("interrupted", "").
		refusal().add("edited", "completed")
}

func (c *chain) head5() chainHead {
	return chainHead{found: true, head: &protocol.AuditHead{Records: c.n, Hash: c.head}}
}

// alter returns entries with the record at i changed by f (its hash and
// signature kept).
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

// rehash recomputes the record's hash after a change, as a forger would;
// the signature stays.
func rehash(m map[string]any) {
	delete(m, "hash")
	b, _ := json.Marshal(m)
	m["hash"], _ = protocol.CanonicalHash(b)
}

// streamSeqs are the stream sequences of messages the report cannot vouch for.
func streamSeqs(rep AuditReport) []uint64 {
	var out []uint64
	for _, u := range rep.Unvouched {
		out = append(out, u.StreamSeq)
	}
	return out
}

func TestCheckChain(t *testing.T) {
	t.Parallel()
	good := refundChain(t)
	head := good.head5()

	reused := refundChain(t)
	second := newChain(t).add("started", "").add("interrupted", "")
	for _, e := range second.entries {
		e.streamSeq += 100
		e.rec.StreamSeq = e.streamSeq
		reused.entries = append(reused.entries, e)
	}
	// Before Interlock signed audit records, and a run upgraded midway.
	legacy := newChain(t).signedWith(nil).add("started", "").add("interrupted", "").add("answered", "").add("interrupted", "").
		refusal().add("edited", "completed")
	upgraded := newChain(t).signedWith(nil).add("started", "").add("interrupted", "").
		signedWith(&deploymentKey).add("answered", "").add("interrupted", "").refusal().add("edited", "completed")

	cases := []struct {
		name      string
		entries   []auditEntry
		head      chainHead
		trust     *trust
		dropped   bool
		wantCheck []string // checks of the problems, in order; none when intact
		wantMsg   string   // in the first problem's message
		wantNote  string
		unvouched []uint64 // stream seqs not vouched for
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
			wantCheck: []string{CheckHash, CheckSignature}, unvouched: []uint64{12},
			wantMsg: "record at stream seq 12 (seq 3, action answered): hash does not match its contents — the record was altered",
		},
		{
			name: "altered record, hash recomputed", head: head, records: 5, refusals: 1,
			entries:   alter(t, good.entries, 2, func(m map[string]any) { m["by"] = "mallory"; rehash(m) }),
			wantCheck: []string{CheckSignature, CheckPrev}, unvouched: []uint64{12, 13},
			wantMsg: "record at stream seq 12 (seq 3, action answered): bad signature: it does not verify with key " + deploymentKey.pub.Kid + " over the record's contents",
		},
		{
			name: "unsigned record after the head", entries: refundChain(t).signedWith(nil).forge("approved", 6, good.head).entries, head: head, records: 6, refusals: 1,
			wantCheck: []string{CheckUnsigned, CheckHead}, unvouched: []uint64{16},
			wantMsg: "record at stream seq 16 (seq 6, action approved): unsigned: it carries no signature",
		},
		{
			name: "record after the head signed with another key", entries: refundChain(t).signedWith(&otherKey).forge("approved", 6, good.head).entries, head: head, records: 6, refusals: 1,
			wantCheck: []string{CheckKey, CheckHead}, unvouched: []uint64{16},
			wantMsg: "signed with key " + otherKey.pub.Kid + ", which is none of the keys published in interlock_config audit.keys (" + deploymentKey.pub.Kid + ")",
		},
		{
			name: "record after the head signed with the deployment's key", entries: refundChain(t).forge("approved", 6, good.head).entries, head: head, records: 6, refusals: 1,
			wantCheck: []string{CheckHead}, unvouched: []uint64{16},
			wantMsg: "the chain ends at record 6 (stream seq 16, action approved) but the checkpoint's head is record 5 (" + short(good.head) + "): records after 5 were not written by Interlock",
		},
		{
			name: "two records after the head", entries: refundChain(t).add("approved", "").add("approved", "").entries, head: head, records: 7, refusals: 1,
			wantCheck: []string{CheckHead, CheckHead}, unvouched: []uint64{16, 17},
		},
		{
			name: "side record of a decision", entries: refundChain(t).signedWith(nil).side("approved").entries, head: head, records: 5, refusals: 1,
			wantCheck: []string{CheckUnsigned, CheckSide}, unvouched: []uint64{16},
			wantMsg: "side record at stream seq 16 (action approved): unsigned",
		},
		{
			name: "side record of a decision signed with the deployment's key", entries: refundChain(t).side("approved").entries, head: head, records: 5, refusals: 1,
			wantCheck: []string{CheckSide}, unvouched: []uint64{16},
			wantMsg: "side record at stream seq 16 (action approved): a side record of action approved: only refusals hang off the chain",
		},
		{
			name: "refusal in the chain", entries: refundChain(t).add("refused", "").entries, head: head, records: 6, refusals: 1,
			wantCheck: []string{CheckMalformed, CheckSide, CheckHead}, unvouched: []uint64{16},
			wantMsg: "it is a refusal without a code",
		},
		{
			name: "a forged record before the deployment's at its place", head: head, records: 6, refusals: 1,
			entries: func() []auditEntry {
				c := newChain(t).add("started", "").add("interrupted", "").add("answered", "")
				c.signedWith(nil).forge("approved", 4, c.head).signedWith(&deploymentKey).add("interrupted", "").refusal().add("edited", "completed")
				return c.entries
			}(),
			wantCheck: []string{CheckUnsigned, CheckChain}, unvouched: []uint64{13},
			wantMsg: "record at stream seq 13 (seq 4, action approved): unsigned",
		},
		{
			name: "wrong prev, hash recomputed", head: head, records: 5, refusals: 1,
			entries: alter(t, good.entries, 3, func(m map[string]any) {
				m["prev"] = strings.Repeat("0", 64)
				rehash(m)
			}),
			// Record 4 is no longer the deployment's: the refusal and
			// record 5 name the real one, which is not there.
			wantCheck: []string{CheckSignature, CheckPrev, CheckPrev, CheckSeq, CheckPrev}, unvouched: []uint64{13, 14, 15},
			wantMsg: "record at stream seq 13 (seq 4, action interrupted): bad signature",
		},
		{
			name: "a record missing", head: head, records: 4, refusals: 1,
			entries:   slices.Delete(slices.Clone(good.entries), 2, 3),
			wantCheck: []string{CheckSeq, CheckPrev}, unvouched: []uint64{13},
			wantMsg: "record at stream seq 13 (seq 4, action interrupted): expected seq 3 after record 2 (stream seq 11)",
		},
		{
			name: "older records aged out", head: head, dropped: true, records: 3, refusals: 1,
			entries: good.entries[2:], wantNote: "the chain starts at record 3 (stream seq 12): records 1 to 2 have aged out",
		},
		{
			name: "chain starts late but nothing aged out", head: head, records: 3, refusals: 1,
			entries: good.entries[2:], wantCheck: []string{CheckMissing}, unvouched: []uint64{12}, wantMsg: "has dropped no message: records 1 to 2 were never in it",
		},
		{
			name: "refusal before the first record left", head: head, dropped: true, records: 1, refusals: 1,
			entries: good.entries[4:], wantNote: "the chain starts at record 5",
		},
		{
			name: "records not yet published", head: chainHead{found: true, head: &protocol.AuditHead{Records: 7, Hash: "ff"}}, records: 5, refusals: 1,
			entries: good.entries, wantCheck: []string{CheckMissing}, wantMsg: "the stream holds records only up to 5: records 6 to 7 are missing",
		},
		{
			name: "head replaced", head: chainHead{found: true, head: &protocol.AuditHead{Records: 5, Hash: strings.Repeat("1", 64)}}, records: 5, refusals: 1,
			entries: good.entries, wantCheck: []string{CheckHead}, unvouched: []uint64{15}, wantMsg: "the record was replaced",
		},
		{
			name: "refusal naming no record", head: head, records: 5, refusals: 1,
			entries: alter(t, good.entries, 4, func(m map[string]any) {
				m["prev"] = strings.Repeat("9", 64)
				rehash(m)
			}),
			wantCheck: []string{CheckSignature, CheckPrev}, unvouched: []uint64{14},
			wantMsg: "refusal at stream seq 14 (action refused): bad signature",
		},
		{
			name: "record of another run", head: head, records: 5, refusals: 1,
			entries:   alter(t, good.entries, 1, func(m map[string]any) { m["run"] = "r-2" }),
			wantCheck: []string{CheckRecord, CheckHash, CheckSignature}, unvouched: []uint64{11},
			wantMsg: "names run r-2 of flow refund, not run r-1 of flow refund",
		},
		{
			name: "malformed record", head: head, records: 5, refusals: 1,
			entries: alter(t, good.entries, 1, func(m map[string]any) {
				delete(m, "at")
				m["prev"] = "abc"
			}),
			wantCheck: []string{CheckMalformed, CheckMalformed, CheckHash, CheckSignature, CheckPrev, CheckSeq, CheckPrev}, unvouched: []uint64{11, 12},
			wantMsg: "record at stream seq 11 (seq 2, action interrupted): it has no time (at)",
		},
		{
			name: "wrong event type", head: head, records: 5, refusals: 1,
			entries: func() []auditEntry {
				es := slices.Clone(good.entries)
				es[0].rec.EventType = "io.interlock.audit.approved"
				return es
			}(),
			wantCheck: []string{CheckType}, unvouched: []uint64{10}, wantMsg: "came as a CloudEvent of type io.interlock.audit.approved, not io.interlock.audit.started",
		},
		{
			name: "not a record", head: head, records: 5, refusals: 1,
			entries:   append(slices.Clone(good.entries), auditEntry{streamSeq: 99, err: errNotARecord}),
			wantCheck: []string{CheckRecord}, unvouched: []uint64{99}, wantMsg: "message at stream seq 99 is not an audit record",
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
			entries:   append(slices.Clone(second.entries), again(second.entries[0], 110), again(second.entries[1], 111)),
			wantCheck: []string{CheckSeq, CheckPrev}, unvouched: []uint64{110}, wantMsg: "expected seq 3 after record 2",
		},
		{name: "nothing in the stream", head: head, wantCheck: []string{CheckMissing}, wantMsg: "holds no record of the run"},
		{
			name: "written before records were signed", entries: legacy.entries, head: legacy.head5(), records: 5, refusals: 1,
			wantCheck: slices.Repeat([]string{CheckUnsigned}, 6), unvouched: []uint64{10, 11, 12, 13, 14, 15},
			wantMsg: "record at stream seq 10 (seq 1, action started): unsigned", wantNote: "no record verifies with the keys published",
		},
		{
			name: "signed from midway", entries: upgraded.entries, head: upgraded.head5(), records: 5, refusals: 1,
			wantCheck: []string{CheckUnsigned, CheckUnsigned}, unvouched: []uint64{10, 11},
		},
		{
			name: "keys unknown to the verifier", entries: good.entries, head: head, records: 5, refusals: 1,
			trust: func() *trust {
				tr, err := newTrust([]protocol.AuditKey{otherKey.pub}, true, "")
				if err != nil {
					t.Fatal(err)
				}
				return &tr
			}(),
			wantCheck: slices.Repeat([]string{CheckKey}, 6), unvouched: []uint64{10, 11, 12, 13, 14, 15},
			wantMsg: "signed with key " + deploymentKey.pub.Kid + ", which is not the pinned key (" + otherKey.pub.Kid + ")",
		},
		{
			name: "no key published", entries: good.entries[:1], head: chainHead{}, records: 1,
			trust: func() *trust {
				tr, err := newTrust(nil, false, "interlock_config audit.keys")
				if err != nil {
					t.Fatal(err)
				}
				return &tr
			}(),
			wantCheck: []string{CheckKey}, unvouched: []uint64{10},
			wantMsg: "signed with key " + deploymentKey.pub.Kid + ", which is unknown: no key is published in interlock_config audit.keys",
		},
		// A run that never existed: no checkpoint, one record.
		{
			name: "a forged one-record chain, unsigned", head: chainHead{}, records: 1,
			entries: newChain(t).signedWith(nil).add("approved", "completed").entries, wantCheck: []string{CheckUnsigned}, unvouched: []uint64{10},
		},
		{
			name: "a forged one-record chain signed with another key", head: chainHead{}, records: 1,
			entries: newChain(t).signedWith(&otherKey).add("approved", "completed").entries, wantCheck: []string{CheckKey}, unvouched: []uint64{10},
		},
		{
			name: "a forged one-record chain naming the deployment's key", head: chainHead{}, records: 1,
			entries: alter(t, newChain(t).signedWith(&otherKey).add("approved", "completed").entries, 0, func(m map[string]any) {
				m["kid"] = deploymentKey.pub.Kid
				rehash(m)
			}),
			wantCheck: []string{CheckSignature}, unvouched: []uint64{10},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := published(t)
			if tc.trust != nil {
				tr = *tc.trust
			}
			rep := checkChain("refund", "r-1", "INTERLOCK_AUDIT", slices.Clone(tc.entries), tc.head, tc.dropped, tr)
			var checks []string
			for _, p := range rep.Problems {
				checks = append(checks, p.Check)
			}
			if !slices.Equal(checks, tc.wantCheck) || rep.Intact != (len(tc.wantCheck) == 0) {
				t.Fatalf("intact %v, problems %v, want %v:\n%s", rep.Intact, checks, tc.wantCheck, messages(rep))
			}
			if got := streamSeqs(rep); !slices.Equal(got, tc.unvouched) || rep.Vouched != len(tc.entries)-len(tc.unvouched) || rep.Messages != len(tc.entries) {
				t.Fatalf("not vouched for: %v, want %v; %d of %d vouched for:\n%s", got, tc.unvouched, rep.Vouched, rep.Messages, messages(rep))
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
	rep := checkChain("refund", "r-1", "INTERLOCK_AUDIT", good.entries, head, false, published(t))
	if rep.Head.Records != 5 || rep.Head.Hash != good.head || !rep.HeadCompared || rep.FirstRecord != 1 ||
		!slices.Equal(rep.SignedBy, []string{deploymentKey.pub.Kid}) || rep.KeysPinned || len(rep.Keys) != 1 || rep.Unvouched != nil {
		t.Errorf("intact report: %+v", rep)
	}
	// The deployment's record that replaced a forged one is the chain's,
	// and the chain goes on from it.
	c := newChain(t).add("started", "").add("interrupted", "").add("answered", "")
	c.signedWith(nil).forge("approved", 4, c.head).signedWith(&deploymentKey).add("interrupted", "").refusal().add("edited", "completed")
	rep = checkChain("refund", "r-1", "INTERLOCK_AUDIT", c.entries, c.head5(), false, published(t))
	if rep.Head.Records != 5 || rep.Head.Hash != c.head || !strings.Contains(rep.Problems[1].Message, "out of the chain: the record signed with key "+deploymentKey.pub.Kid+" at stream seq 14 (seq 4, action interrupted) follows record 3 (stream seq 12)") {
		t.Errorf("after a forged record ousted:\n%s", messages(rep))
	}
}

// again is e as if read again at another stream sequence.
func again(e auditEntry, streamSeq uint64) auditEntry {
	e.streamSeq, e.rec.StreamSeq = streamSeq, streamSeq
	return e
}

var errNotARecord = &events.Error{Reason: events.ReasonInvalidPayload, Msg: "not a CloudEvent"}

func messages(rep AuditReport) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "  [%s] %s\n", p.Check, p.Message)
	}
	for _, n := range rep.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	return b.String()
}
