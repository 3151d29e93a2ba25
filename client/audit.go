package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// auditBatch is how many records one batched read of the audit stream asks for.
const auditBatch = 256

// auditEntry is one message of a run's audit subject: the record, or why
// it is none.
type auditEntry struct {
	streamSeq uint64
	rec       protocol.AuditRecord
	err       error
	// trusted is set once the record's signature verified with a
	// trusted key.
	trusted bool
}

// Audit returns every record on a run's audit subject
// (<prefix>.audit.<flow>.<run>), in stream order, read with batched direct
// gets of the audit stream (no consumer). Records that aged out of the
// stream (serve's --audit-max-age) are not returned. A run with no record
// and no checkpoint is an error wrapping [ErrNotFound]; a message on the
// subject that is not an audit record is an error naming its sequence
// ([Client.AuditTrail] lists it instead). Audit does not check the
// records: anyone who may publish on the subject can put one there. Use
// [Client.AuditTrail] to read them with the verifier's verdict on each.
func (c *Client) Audit(ctx context.Context, flow, run string) ([]protocol.AuditRecord, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	entries, err := c.auditEntries(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	recs := make([]protocol.AuditRecord, 0, len(entries))
	for _, e := range entries {
		if e.err != nil {
			return nil, fmt.Errorf("client: message at sequence %d of %s is not an audit record: %w; `interlock audit verify %s %s` reports every such message", e.streamSeq, c.names.AuditStream(), e.err, flow, run)
		}
		recs = append(recs, e.rec)
	}
	if len(recs) == 0 {
		if _, err := c.Checkpoint(ctx, flow, run); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// auditEntries reads every message on a run's audit subject, in stream order.
func (c *Client) auditEntries(ctx context.Context, flow, run string) ([]auditEntry, error) {
	if err := CheckName("flow", flow); err != nil {
		return nil, err
	}
	if err := CheckName("run", run); err != nil {
		return nil, err
	}
	stream := c.names.AuditStream()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: c.names.Audit(flow, run), what: "stream " + stream}
	var out []auditEntry
	for start := uint64(1); ; {
		b, err := g.batch(ctx, start, auditBatch)
		if err != nil {
			return nil, err
		}
		for _, m := range b.msgs {
			out = append(out, decodeAuditEntry(m))
		}
		if len(b.msgs) == 0 || b.pending == 0 {
			return out, nil
		}
		start = b.msgs[len(b.msgs)-1].seq + 1
	}
}

func decodeAuditEntry(m batchMsg) auditEntry {
	e := auditEntry{streamSeq: m.seq}
	ev, err := events.Decode(m.header, m.data)
	if err != nil {
		e.err = err
		return e
	}
	if e.rec, err = protocol.DecodeAuditRecord(ev.Data()); err != nil {
		e.err = err
		return e
	}
	e.rec.StreamSeq, e.rec.EventType = m.seq, ev.Type()
	return e
}

// Errors of the audit reads.
var (
	// ErrNoAuditKeys: the deployment's workers published no audit key
	// (<prefix>_config, key audit.keys): they predate audit signing, or
	// none has started.
	ErrNoAuditKeys = errors.New("client: no audit keys published")
)

// AuditKeys returns the public keys the deployment's workers published to
// verify audit records with (<prefix>_config, key audit.keys), oldest
// first. Each worker adds the key of its secret when it starts; none is
// ever removed. With none published it returns an error wrapping
// [ErrNoAuditKeys]. Anyone who may write the bucket may add a key: an
// auditor who does not trust them pins the deployment's key instead
// ([Client.VerifyAudit]).
func (c *Client) AuditKeys(ctx context.Context) ([]protocol.AuditKey, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	// One direct get with the key in its subject: the one right to the
	// bucket a client user needs.
	bucket := c.names.ConfigBucket()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET.KV_" + bucket, filter: "$KV." + bucket + "." + protocol.AuditKeysKey, keyed: true, what: "bucket " + bucket}
	m, err := g.lastMsg(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("client: reading %s in bucket %s (has `interlock serve` run once, with the same --prefix?): %w", protocol.AuditKeysKey, bucket, err)
	}
	if err != nil {
		return nil, err
	}
	if m == nil || m.marker {
		return nil, fmt.Errorf("%w: %s holds no %s; each worker publishes its key there when it starts (workers that predate audit signing publish none)", ErrNoAuditKeys, bucket, protocol.AuditKeysKey)
	}
	keys, err := protocol.DecodeAuditKeys(m.data)
	if err != nil {
		return nil, fmt.Errorf("client: %s in %s (revision %d): %w; pin the deployment's key instead (`interlock audit verify --key`)", protocol.AuditKeysKey, bucket, m.seq, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: %s in %s is an empty list", ErrNoAuditKeys, protocol.AuditKeysKey, bucket)
	}
	return keys, nil
}

// Checks an [AuditProblem] names: each is a reason the verifier cannot
// vouch for a message on the run's audit subject or, for CheckMissing and
// a CheckHead without a stream sequence, a part of the chain that is not
// there.
const (
	// CheckRecord: the message is not an audit record at all, or names
	// another run.
	CheckRecord = "record"
	// CheckMalformed: the record is not shaped as Interlock writes one:
	// an action none of Interlock's, no time, a prev or kid that is not a
	// hash or a key id, a refusal without a code.
	CheckMalformed = "malformed"
	// CheckType: the CloudEvent type is not io.interlock.audit.<action>.
	CheckType = "type"
	// CheckHash: the record's hash is missing or does not match its contents.
	CheckHash = "hash"
	// CheckUnsigned: the record carries no signature: written before
	// Interlock signed audit records, or by someone without the
	// deployment's key.
	CheckUnsigned = "unsigned"
	// CheckKey: the record is signed with a key none of those trusted
	// (published by the workers, or pinned).
	CheckKey = "key"
	// CheckSignature: the signature does not verify, with the key the
	// record names, over the record's contents.
	CheckSignature = "signature"
	// CheckSide: a side record that is not a refusal (only refusals hang
	// off the chain), or a refusal in the chain.
	CheckSide = "side"
	// CheckSeq: a chained record is not at the next position.
	CheckSeq = "seq"
	// CheckPrev: a record's prev is not the hash of the record before it
	// (for a refusal: of any record of the chain before it).
	CheckPrev = "prev"
	// CheckChain: a record out of the chain: the deployment's signed record
	// at its position follows the record before it instead.
	CheckChain = "chain"
	// CheckMissing: records are missing from the stream.
	CheckMissing = "missing"
	// CheckHead: the chain's last record is not the checkpoint's head.
	CheckHead = "head"
)

// AuditProblem is a reason the verifier cannot vouch for a message on a
// run's audit subject, or a break in the run's chain.
type AuditProblem struct {
	// Check is what failed: one of the Check constants.
	Check string `json:"check"`
	// StreamSeq is the message's sequence in the audit stream; 0 when the
	// problem is records the stream lacks.
	StreamSeq uint64 `json:"streamSeq,omitempty"`
	// Record is the record's position in the chain (0 for a side record).
	Record uint64 `json:"record,omitempty"`
	Action string `json:"action,omitempty"`
	// Expected and Found are what the check wanted and what it read
	// (hashes in full, positions as numbers).
	Expected string `json:"expected,omitempty"`
	Found    string `json:"found,omitempty"`
	// Message says it in words, with short hashes.
	Message string `json:"message"`
}

// AuditUnvouched is a message on a run's audit subject that the verifier
// cannot vouch for.
type AuditUnvouched struct {
	StreamSeq uint64 `json:"streamSeq"`
	// Record, Action and Side are what the record claims, when the message
	// is one.
	Record uint64 `json:"record,omitempty"`
	Action string `json:"action,omitempty"`
	Side   bool   `json:"side,omitempty"`
	// Checks are the checks it failed, in the order of the report's
	// Problems, which say what each found.
	Checks []string `json:"checks"`
}

// AuditReport is what [Client.VerifyAudit] found.
type AuditReport struct {
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Intact is true when nothing is in Problems: the verifier vouches for
	// every message on the run's audit subject (each is a well-formed
	// record of the run whose hash matches its contents and whose
	// signature over that hash verifies with a trusted key; only refusals
	// are side records), the chained records follow each other without a
	// gap, each naming the one before, every refusal names a record of the
	// chain, and the last record is the checkpoint's head (when the
	// checkpoint could be read). A chain that is intact was written with
	// the deployment's key; the verifier cannot tell more of a run it has
	// no checkpoint of.
	Intact bool `json:"intact"`
	// Messages counts the messages read on the subject, Vouched those the
	// verifier vouches for.
	Messages int `json:"messages"`
	Vouched  int `json:"vouched"`
	// Records counts the chained records read, Refusals the side records
	// that are refusals.
	Records  int `json:"records"`
	Refusals int `json:"refusals"`
	// FirstRecord is the position of the first record of the chain: 1,
	// unless older records aged out of the stream.
	FirstRecord uint64 `json:"firstRecord,omitempty"`
	// Head is the last record of the chain.
	Head protocol.AuditHead `json:"head"`
	// Checkpoint is the head the run's checkpoint records, nil when the
	// checkpoint is gone or holds none; HeadCompared says whether Head was
	// compared with it.
	Checkpoint   *protocol.AuditHead `json:"checkpoint,omitempty"`
	HeadCompared bool                `json:"headCompared"`
	// Keys are the keys the signatures were checked against: the pinned
	// ones when KeysPinned, else those the workers published in
	// <prefix>_config, key audit.keys. SignedBy are the ids of the keys
	// that signed the records vouched for.
	Keys       []protocol.AuditKey `json:"keys"`
	KeysPinned bool                `json:"keysPinned"`
	SignedBy   []string            `json:"signedBy,omitempty"`
	// Notes say what the check could not cover, or found unusual but sound.
	Notes []string `json:"notes,omitempty"`
	// Problems say why the verifier cannot vouch for a message, and where
	// the chain breaks, in stream order (problems of no message last).
	Problems []AuditProblem `json:"problems,omitempty"`
	// Unvouched lists the messages the verifier cannot vouch for, in
	// stream order.
	Unvouched []AuditUnvouched `json:"unvouched,omitempty"`
}

// AuditEntry is one message on a run's audit subject, with the verifier's
// verdict on it.
type AuditEntry struct {
	// StreamSeq is the message's sequence in the audit stream.
	StreamSeq uint64
	// Record is the audit record, when the message is one (Err is nil).
	Record protocol.AuditRecord
	// Err says why the message is not an audit record.
	Err error
	// Vouched is set when the verifier vouches for the record; otherwise
	// Checks name the checks it failed (see [AuditUnvouched]).
	Vouched bool
	Checks  []string
}

// AuditTrail is a run's audit subject read and verified: every message,
// in stream order, and the report.
type AuditTrail struct {
	Entries []AuditEntry
	Report  AuditReport
}

// VerifyAudit reads a run's audit records and says which it vouches for,
// and why not the others. It checks each message: that it is an audit
// record of the run, well formed, carried by the CloudEvent type of its
// action; that its hash matches its contents; that its signature over
// that hash verifies with a trusted key, which are the keys pinned, if
// any are given, else those the deployment's workers published
// ([Client.AuditKeys]); that a side record is a refusal. It checks the
// chain: each chained record's position (1, 2, 3, ... from the first
// record the stream still holds) and prev (the hash of the chained record
// before it, "" for the first); each refusal's prev (a hash of the chain
// before it); and the last chained record against the head in the run's
// checkpoint, when the checkpoint still exists. A record the deployment's
// key did not sign takes a place in the chain only where it fits; where
// the deployment's record at that place follows the record before it,
// the other is out of the chain.
//
// Records written before Interlock signed audit records are reported
// unsigned: their chain is checked, but nothing vouches for who wrote
// them.
//
// Records that cannot be vouched for are not an error: the report says
// which and why. The error is for what kept the check from running (no
// such run, an unreachable server, keys that cannot be read). While the
// run moves, or while a transition's records are still being published,
// VerifyAudit reads again, up to the client's wait.
func (c *Client) VerifyAudit(ctx context.Context, flow, run string, pinned ...protocol.AuditKey) (AuditReport, error) {
	t, err := c.AuditTrail(ctx, flow, run, pinned...)
	return t.Report, err
}

// VouchedAudit returns the audit records of a run that the verifier
// vouches for (see [Client.VerifyAudit]), in stream order: what a surface
// shows a person as the run's history, or quotes as who decided. A
// message it cannot vouch for is left out.
func (c *Client) VouchedAudit(ctx context.Context, flow, run string) ([]protocol.AuditRecord, error) {
	t, err := c.AuditTrail(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	var recs []protocol.AuditRecord
	for _, e := range t.Entries {
		if e.Vouched {
			recs = append(recs, e.Record)
		}
	}
	return recs, nil
}

// AuditTrail reads every message on a run's audit subject and verifies
// them as [Client.VerifyAudit] does, returning the messages, each with
// its verdict, and the report: what a listing of the run's history shows,
// marking what cannot be vouched for.
func (c *Client) AuditTrail(ctx context.Context, flow, run string, pinned ...protocol.AuditKey) (AuditTrail, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if err := CheckName("flow", flow); err != nil {
		return AuditTrail{}, err
	}
	if err := CheckName("run", run); err != nil {
		return AuditTrail{}, err
	}
	tr, err := c.trust(ctx, pinned)
	if err != nil {
		return AuditTrail{}, err
	}
	stream := c.names.AuditStream()
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return AuditTrail{}, fmt.Errorf("client: binding %s (has `interlock serve` run once, with the same --prefix?): %w", stream, err)
	}
	// Records leave the stream only from its front, by age or limits: the
	// deletes and purges are denied.
	dropped := s.CachedInfo().State.FirstSeq > 1
	deadline := time.Now().Add(c.wait)
	poll := firstPoll
	for {
		before, found, err := c.auditHead(ctx, flow, run)
		if err != nil {
			return AuditTrail{}, err
		}
		entries, err := c.auditEntries(ctx, flow, run)
		if err != nil {
			return AuditTrail{}, err
		}
		after, foundAfter, err := c.auditHead(ctx, flow, run)
		if err != nil {
			return AuditTrail{}, err
		}
		if !foundAfter && len(entries) == 0 {
			return AuditTrail{}, c.notFound(ctx, flow, run)
		}
		moved := found != foundAfter || before.rev != after.rev
		rep := checkChain(flow, run, stream, entries, chainHead{found: foundAfter, head: after.head}, dropped, tr)
		if (!moved && !behind(rep)) || time.Now().After(deadline) {
			return trailOf(entries, rep), nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return AuditTrail{}, ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, maxPoll)
	}
}

// trailOf pairs the messages read with the report's verdicts.
func trailOf(entries []auditEntry, rep AuditReport) AuditTrail {
	why := map[uint64][]string{}
	for _, u := range rep.Unvouched {
		why[u.StreamSeq] = u.Checks
	}
	t := AuditTrail{Entries: make([]AuditEntry, len(entries)), Report: rep}
	for i, e := range entries {
		checks := why[e.streamSeq]
		t.Entries[i] = AuditEntry{StreamSeq: e.streamSeq, Record: e.rec, Err: e.err, Vouched: len(checks) == 0, Checks: checks}
	}
	return t
}

// trust is the keys the signatures are checked against.
type trust struct {
	keys   []protocol.AuditKey
	byKid  map[string]ed25519.PublicKey
	pinned bool
	// where says where published keys are read: "<prefix>_config audit.keys".
	where string
	// note says what a reader should know of the keys, if anything.
	note string
}

// trust returns the pinned keys, when there are any, else the keys the
// workers published.
func (c *Client) trust(ctx context.Context, pinned []protocol.AuditKey) (trust, error) {
	if len(pinned) > 0 {
		return newTrust(pinned, true, "")
	}
	where := c.names.ConfigBucket() + " " + protocol.AuditKeysKey
	keys, err := c.AuditKeys(ctx)
	if errors.Is(err, ErrNoAuditKeys) {
		tr, _ := newTrust(nil, false, where)
		tr.note = fmt.Sprintf("no audit key is published in %s (workers that predate audit signing publish none), so no signature could be checked; pin the deployment's key, which `interlock serve` prints", where)
		return tr, nil
	}
	if err != nil {
		return trust{}, err
	}
	return newTrust(keys, false, where)
}

func newTrust(keys []protocol.AuditKey, pinned bool, where string) (trust, error) {
	t := trust{keys: keys, byKid: map[string]ed25519.PublicKey{}, pinned: pinned, where: where}
	if t.keys == nil {
		t.keys = []protocol.AuditKey{}
	}
	for _, k := range keys {
		pub, err := k.Key()
		if err != nil {
			return trust{}, fmt.Errorf("client: %w", err)
		}
		t.byKid[k.Kid] = pub
	}
	return t, nil
}

// kids lists the ids of the trusted keys.
func (t trust) kids() string {
	kids := make([]string, len(t.keys))
	for i, k := range t.keys {
		kids[i] = k.Kid
	}
	return strings.Join(kids, ", ")
}

// describe names the trusted keys: "the keys published in ... (kids)".
func (t trust) describe() string {
	switch {
	case t.pinned && len(t.keys) == 1:
		return "the pinned key (" + t.kids() + ")"
	case t.pinned:
		return "the pinned keys (" + t.kids() + ")"
	case len(t.keys) == 0:
		return "no key (none is published in " + t.where + ")"
	}
	return "the keys published in " + t.where + " (" + t.kids() + ")"
}

// lacks says that a key is not trusted: "is none of the keys ...".
func (t trust) lacks() string {
	switch {
	case t.pinned && len(t.keys) == 1:
		return "is not " + t.describe()
	case len(t.keys) == 0:
		return "is unknown: no key is published in " + t.where
	}
	return "is none of " + t.describe()
}

// behind reports whether the report's only trouble may be records still
// being published: the checkpoint's head is past the last record read.
func behind(rep AuditReport) bool {
	return len(rep.Problems) == 1 && rep.Problems[0].Check == CheckMissing && rep.Problems[0].StreamSeq == 0 && rep.HeadCompared
}

// runHead is a checkpoint's audit head and revision.
type runHead struct {
	rev  uint64
	head *protocol.AuditHead
}

// auditHead reads the audit head of a run's checkpoint; found is false
// when the run has no checkpoint (it never existed, or it finished and its
// checkpoint was removed).
func (c *Client) auditHead(ctx context.Context, flow, run string) (runHead, bool, error) {
	cp, err := c.Checkpoint(ctx, flow, run)
	if errors.Is(err, ErrNotFound) {
		return runHead{}, false, nil
	}
	if err != nil {
		return runHead{}, false, err
	}
	return runHead{rev: cp.Checkpoint, head: cp.Audit}, true, nil
}

// chainHead is what the checkpoint says of the chain.
type chainHead struct {
	found bool                // the checkpoint exists
	head  *protocol.AuditHead // nil when it records no head
}

// checkChain checks the messages of a run's audit subject, in stream
// order, each on its own, against each other and against the checkpoint's
// head. dropped says whether the stream has lost messages from its front
// (by age).
func checkChain(flow, run, stream string, entries []auditEntry, cp chainHead, dropped bool, tr trust) AuditReport {
	rep := AuditReport{Flow: flow, Run: run, Messages: len(entries), Keys: tr.keys, KeysPinned: tr.pinned}
	problem := func(p AuditProblem) { rep.Problems = append(rep.Problems, p) }
	if tr.note != "" {
		rep.Notes = append(rep.Notes, tr.note)
	}
	// genesis is what a refusal before the first chained record names:
	// "" for a whole chain, the first record's prev for one whose older
	// records aged out.
	genesis := ""
	for _, e := range entries {
		if e.err == nil && !e.rec.Side {
			if e.rec.Seq > 1 {
				genesis = e.rec.Prev
			}
			break
		}
	}
	var (
		links  []*auditEntry              // the chain, in order
		bySeq  = map[uint64]*auditEntry{} // links by position
		seen   = map[string]bool{}        // hashes of the links, and the head before an aged-out front
		signed int                        // records whose signature verified
	)
	last := func() *auditEntry {
		if len(links) == 0 {
			return nil
		}
		return links[len(links)-1]
	}
	link := func(e *auditEntry) {
		if len(links) == 0 {
			rep.FirstRecord = e.rec.Seq
		}
		links = append(links, e)
		seen[e.rec.Hash] = true
		if _, dup := bySeq[e.rec.Seq]; !dup {
			bySeq[e.rec.Seq] = e
		}
	}
	// oust takes the links after links[j] out of the chain: the
	// deployment's record by follows links[j] (or, for j = -1, starts the
	// chain) instead.
	oust := func(j int, by *auditEntry) {
		for _, x := range links[j+1:] {
			delete(seen, x.rec.Hash)
			if bySeq[x.rec.Seq] == x {
				delete(bySeq, x.rec.Seq)
			}
			after := "starts the chain"
			if j >= 0 {
				after = fmt.Sprintf("follows record %d (stream seq %d)", links[j].rec.Seq, links[j].streamSeq)
			}
			problem(AuditProblem{
				Check: CheckChain, StreamSeq: x.streamSeq, Record: x.rec.Seq, Action: x.rec.Action,
				Expected: by.rec.Hash, Found: x.rec.Hash,
				Message: fmt.Sprintf("%s: out of the chain: the record signed with key %s at stream seq %d (seq %d, action %s) %s, so this one is no part of the run's history",
					describeRecord(x), by.rec.Kid, by.streamSeq, by.rec.Seq, by.rec.Action, after),
			})
		}
		links = links[:j+1]
		if j < 0 {
			rep.FirstRecord = 0
		}
	}

	for i := range entries {
		e := &entries[i]
		if e.err != nil {
			problem(AuditProblem{
				Check: CheckRecord, StreamSeq: e.streamSeq,
				Message: fmt.Sprintf("message at stream seq %d is not an audit record: %v", e.streamSeq, e.err),
			})
			continue
		}
		rec := &e.rec
		where := describeRecord(e)
		base := AuditProblem{StreamSeq: e.streamSeq, Record: rec.Seq, Action: rec.Action}
		fail := func(check, expected, found, msg string) {
			p := base
			p.Check, p.Expected, p.Found, p.Message = check, expected, found, msg
			problem(p)
		}
		if rec.Flow != flow || rec.Run != run {
			fail(CheckRecord, flow+" "+run, rec.Flow+" "+rec.Run,
				fmt.Sprintf("%s: names run %s of flow %s, not run %s of flow %s", where, rec.Run, rec.Flow, run, flow))
		}
		for _, m := range malformed(rec) {
			fail(CheckMalformed, "", "", where+": "+m)
		}
		if want := protocol.AuditType(rec.Action); rec.EventType != want {
			fail(CheckType, want, rec.EventType, fmt.Sprintf("%s: came as a CloudEvent of type %s, not %s", where, rec.EventType, want))
		}
		sum, err := protocol.CanonicalHash(rec.Data)
		switch {
		case rec.Hash == "":
			fail(CheckHash, sum, "", where+": has no hash, so nothing chains it")
		case err != nil:
			fail(CheckHash, "", rec.Hash, fmt.Sprintf("%s: its hash cannot be computed: %v", where, err))
		case sum != rec.Hash:
			fail(CheckHash, sum, rec.Hash, fmt.Sprintf("%s: hash does not match its contents — the record was altered (it says %s, its contents hash to %s)", where, short(rec.Hash), short(sum)))
		}
		e.trusted = checkSignature(rec, sum, tr, where, fail)
		if e.trusted {
			signed++
		}

		if rec.Side {
			if rec.Action != protocol.ActionRefused {
				fail(CheckSide, protocol.ActionRefused, rec.Action,
					fmt.Sprintf("%s: a side record of action %s: only refusals hang off the chain, so this is no decision of the run and Interlock wrote no such record", where, rec.Action))
			} else {
				rep.Refusals++
			}
			l := last()
			ok := seen[rec.Prev]
			if l == nil {
				ok = rec.Prev == genesis
			}
			if !ok {
				if l == nil {
					fail(CheckPrev, genesis, rec.Prev, fmt.Sprintf("%s: prev names %s, but no record of the chain comes before it", where, shortOr(rec.Prev)))
				} else {
					fail(CheckPrev, l.rec.Hash, rec.Prev, fmt.Sprintf("%s: prev names %s, which is no record of the chain before it (the head then was record %d, %s)", where, shortOr(rec.Prev), l.rec.Seq, short(l.rec.Hash)))
				}
			}
			if rec.Seq != 0 {
				fail(CheckSeq, "0", fmt.Sprint(rec.Seq), fmt.Sprintf("%s: a side record takes no position in the chain, but this one claims seq %d", where, rec.Seq))
			}
			continue
		}
		if rec.Action == protocol.ActionRefused {
			fail(CheckSide, "side", "chained", where+": a refusal in the chain: Interlock writes refusals as side records, never at a position")
		}

		rep.Records++
		l := last()
		if l != nil && rec.Seq == l.rec.Seq && rec.Hash == l.rec.Hash && bytes.Equal(rec.Data, l.rec.Data) {
			rep.Records--
			rep.Notes = append(rep.Notes, fmt.Sprintf("record %d is in the stream twice, the same both times (stream seq %d and %d): a repeated publish", rec.Seq, l.streamSeq, e.streamSeq))
			continue
		}
		if l != nil && e.trusted && !follows(e, l) {
			if j, ok := below(links, e); ok {
				oust(j, e)
				l = last()
			}
		}
		switch {
		case l == nil:
			ok := true
			switch {
			case rec.Seq == 0:
				ok = false
				fail(CheckSeq, "1", "0", where+": has no position in the chain (seq), and is no side record")
			case rec.Seq == 1 && rec.Prev != "":
				ok = false
				fail(CheckPrev, "", rec.Prev, fmt.Sprintf("%s: prev names %s, but the first record of a chain names none", where, short(rec.Prev)))
			case rec.Seq > 1 && !dropped:
				ok = false
				fail(CheckMissing, "1", fmt.Sprint(rec.Seq), fmt.Sprintf("%s: the chain starts at record %d, but %s has dropped no message: records 1 to %d were never in it", where, rec.Seq, stream, rec.Seq-1))
			case rec.Seq > 1:
				seen[rec.Prev] = true // the head before the records still held
				rep.Notes = append(rep.Notes, fmt.Sprintf("the chain starts at record %d (stream seq %d): records 1 to %d have aged out of %s; checked from there", rec.Seq, e.streamSeq, rec.Seq-1, stream))
			}
			if ok || e.trusted {
				link(e)
			}
		case follows(e, l):
			link(e)
		case rec.Seq == 1 && rec.Prev == "" && rec.Action == protocol.ActionStarted && ended(l) && (e.trusted || !l.trusted):
			// A finished run's checkpoint was removed and its id used again.
			rep.Notes = append(rep.Notes, fmt.Sprintf("the run id was used again: a new run's chain starts at stream seq %d, after the earlier run ended at record %d", e.streamSeq, l.rec.Seq))
			links, bySeq, seen = nil, map[uint64]*auditEntry{}, map[string]bool{}
			link(e)
			rep.FirstRecord = 1
		default:
			if want := l.rec.Seq + 1; rec.Seq != want {
				fail(CheckSeq, fmt.Sprint(want), fmt.Sprint(rec.Seq), fmt.Sprintf("%s: expected seq %d after record %d (stream seq %d)", where, want, l.rec.Seq, l.streamSeq))
			}
			if rec.Prev != l.rec.Hash {
				fail(CheckPrev, l.rec.Hash, rec.Prev, fmt.Sprintf("%s: prev names %s, but the record before it (seq %d, stream seq %d) has hash %s", where, shortOr(rec.Prev), l.rec.Seq, l.streamSeq, short(l.rec.Hash)))
			}
			// The deployment's record stands in the chain where it is;
			// another one that does not fit takes no place in it.
			if e.trusted {
				link(e)
			}
		}
	}
	l := last()
	if l != nil {
		rep.Head = protocol.AuditHead{Records: l.rec.Seq, Hash: l.rec.Hash}
	}
	if signed == 0 && len(entries) > 0 && len(tr.keys) > 0 {
		rep.Notes = append(rep.Notes, "no record verifies with "+tr.describe()+": the records were written before Interlock signed audit records, or with another key; their chain is checked, but nothing vouches for who wrote them")
	}
	compareHead(&rep, stream, links, bySeq, cp)
	finish(&rep, entries)
	return rep
}

// checkSignature checks a record's signature against the trusted keys,
// reporting through fail what keeps it from verifying; it returns whether
// it verified. sum is the record's hash as computed from its contents.
func checkSignature(rec *protocol.AuditRecord, sum string, tr trust, where string, fail func(check, expected, found, msg string)) bool {
	switch {
	case rec.Sig == "" && rec.Kid == "":
		fail(CheckUnsigned, "", "", where+": unsigned: it carries no signature (kid, sig), so nothing vouches that the deployment wrote it: it was written before Interlock signed audit records, or by someone without the deployment's key")
		return false
	case rec.Sig == "":
		fail(CheckUnsigned, "", "", fmt.Sprintf("%s: unsigned: it names key %s but carries no signature (sig)", where, rec.Kid))
		return false
	case rec.Kid == "":
		fail(CheckKey, "", "", where+": it carries a signature but names no key (kid), so the signature cannot be checked")
		return false
	}
	pub, ok := tr.byKid[rec.Kid]
	if !ok {
		fail(CheckKey, "", rec.Kid, fmt.Sprintf("%s: signed with key %s, which %s", where, rec.Kid, tr.lacks()))
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(rec.Sig)
	digest, herr := hex.DecodeString(sum)
	if err != nil || len(sig) != ed25519.SignatureSize || herr != nil || len(digest) != sha256.Size || !ed25519.Verify(pub, digest, sig) {
		fail(CheckSignature, "", rec.Sig, fmt.Sprintf("%s: bad signature: it does not verify with key %s over the record's contents — the record was altered, or forged", where, rec.Kid))
		return false
	}
	return true
}

// malformed says how a record is not shaped as Interlock writes one.
func malformed(rec *protocol.AuditRecord) []string {
	var out []string
	if !slices.Contains(protocol.AuditActions(), rec.Action) {
		out = append(out, fmt.Sprintf("its action %q is none of Interlock's", rec.Action))
	}
	if rec.At.IsZero() {
		out = append(out, "it has no time (at)")
	}
	if rec.Prev != "" && !isHex(rec.Prev, 64) {
		out = append(out, fmt.Sprintf("its prev %q is not a hash (64 lower-case hex digits)", rec.Prev))
	}
	if rec.Kid != "" && !isHex(rec.Kid, 16) {
		out = append(out, fmt.Sprintf("its kid %q is not a key id (16 lower-case hex digits)", rec.Kid))
	}
	if rec.Action == protocol.ActionRefused && rec.Code == "" {
		out = append(out, "it is a refusal without a code")
	}
	return out
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// follows reports whether e is the record after l in a chain.
func follows(e, l *auditEntry) bool {
	return e.rec.Seq == l.rec.Seq+1 && e.rec.Prev == l.rec.Hash
}

// below finds where the deployment's record e belongs when it does not
// follow the chain's last link: the link it follows, with only links the
// deployment's key did not sign above it, or -1 when it starts a chain
// and no link is signed. ok is false when there is no such place.
func below(links []*auditEntry, e *auditEntry) (int, bool) {
	for j := len(links) - 1; j >= 0; j-- {
		if follows(e, links[j]) {
			return j, true
		}
		if links[j].trusted {
			return 0, false
		}
	}
	return -1, e.rec.Seq == 1 && e.rec.Prev == ""
}

// ended reports whether a record ended its run.
func ended(e *auditEntry) bool {
	return e.rec.Outcome != nil && e.rec.Outcome.Status.Finished()
}

// compareHead compares the chain's last record with the checkpoint's
// head.
func compareHead(rep *AuditReport, stream string, links []*auditEntry, bySeq map[uint64]*auditEntry, cp chainHead) {
	switch {
	case !cp.found:
		rep.Notes = append(rep.Notes, "the run's checkpoint is gone (a finished run's is removed after serve's --keep-finished, and a run that never existed has none), so the head could not be compared with it")
		return
	case cp.head == nil:
		rep.Notes = append(rep.Notes, "the run's checkpoint records no audit head, so the head could not be compared with it")
		return
	}
	h := *cp.head
	rep.Checkpoint, rep.HeadCompared = &h, true
	var last *auditEntry
	if len(links) > 0 {
		last = links[len(links)-1]
	}
	p := AuditProblem{Expected: fmt.Sprintf("%d %s", h.Records, h.Hash)}
	switch {
	case last == nil:
		if h.Records > 0 {
			p.Check, p.Found = CheckMissing, "0"
			p.Message = fmt.Sprintf("the checkpoint's head is record %d (%s), but %s holds no record of the run's chain", h.Records, short(h.Hash), stream)
			rep.Problems = append(rep.Problems, p)
		}
	case last.rec.Seq == h.Records && last.rec.Hash == h.Hash:
	case last.rec.Seq > h.Records:
		var past []*auditEntry
		for _, x := range links {
			if x.rec.Seq > h.Records {
				past = append(past, x)
			}
		}
		next := past[0]
		p.Check, p.StreamSeq, p.Record, p.Action = CheckHead, next.streamSeq, next.rec.Seq, next.rec.Action
		p.Found = fmt.Sprintf("%d %s", last.rec.Seq, last.rec.Hash)
		if at := bySeq[h.Records]; at != nil && at.rec.Hash != h.Hash {
			p.Message = fmt.Sprintf("the checkpoint's head is record %d (%s), but record %d in the stream (stream seq %d) has hash %s, and the chain goes on to record %d: records from %d on were not written by Interlock",
				h.Records, short(h.Hash), h.Records, at.streamSeq, short(at.rec.Hash), last.rec.Seq, h.Records)
		} else {
			p.Message = fmt.Sprintf("the chain ends at record %d (stream seq %d, action %s) but the checkpoint's head is record %d (%s): records after %d were not written by Interlock",
				last.rec.Seq, last.streamSeq, last.rec.Action, h.Records, short(h.Hash), h.Records)
		}
		rep.Problems = append(rep.Problems, p)
		for _, x := range past[1:] {
			rep.Problems = append(rep.Problems, AuditProblem{
				Check: CheckHead, StreamSeq: x.streamSeq, Record: x.rec.Seq, Action: x.rec.Action, Expected: p.Expected,
				Message: fmt.Sprintf("%s: after the checkpoint's head, record %d: not written by Interlock", describeRecord(x), h.Records),
			})
		}
	case last.rec.Seq < h.Records:
		p.Check, p.Found = CheckMissing, fmt.Sprintf("%d %s", last.rec.Seq, last.rec.Hash)
		p.Message = fmt.Sprintf("the checkpoint's head is record %d (%s), but the stream holds records only up to %d: records %d to %d are missing (not yet published, or lost)",
			h.Records, short(h.Hash), last.rec.Seq, last.rec.Seq+1, h.Records)
		rep.Problems = append(rep.Problems, p)
	default:
		p.Check, p.StreamSeq, p.Record, p.Action = CheckHead, last.streamSeq, last.rec.Seq, last.rec.Action
		p.Found = fmt.Sprintf("%d %s", last.rec.Seq, last.rec.Hash)
		p.Message = fmt.Sprintf("the chain ends at record %d (stream seq %d) with hash %s, but the checkpoint's head is record %d with hash %s: the record was replaced",
			last.rec.Seq, last.streamSeq, short(last.rec.Hash), h.Records, short(h.Hash))
		rep.Problems = append(rep.Problems, p)
	}
}

// finish orders the problems, says which messages cannot be vouched for,
// and counts the rest.
func finish(rep *AuditReport, entries []auditEntry) {
	// Stream order; problems of no message (records missing) last.
	slices.SortStableFunc(rep.Problems, func(a, b AuditProblem) int {
		switch {
		case a.StreamSeq == b.StreamSeq:
			return 0
		case a.StreamSeq == 0:
			return 1
		case b.StreamSeq == 0:
			return -1
		}
		return cmp.Compare(a.StreamSeq, b.StreamSeq)
	})
	checks := map[uint64][]string{}
	for _, p := range rep.Problems {
		if p.StreamSeq != 0 && !slices.Contains(checks[p.StreamSeq], p.Check) {
			checks[p.StreamSeq] = append(checks[p.StreamSeq], p.Check)
		}
	}
	for _, e := range entries {
		c, bad := checks[e.streamSeq]
		if !bad {
			rep.Vouched++
			if !slices.Contains(rep.SignedBy, e.rec.Kid) {
				rep.SignedBy = append(rep.SignedBy, e.rec.Kid)
			}
			continue
		}
		u := AuditUnvouched{StreamSeq: e.streamSeq, Checks: c}
		if e.err == nil {
			u.Record, u.Action, u.Side = e.rec.Seq, e.rec.Action, e.rec.Side
		}
		rep.Unvouched = append(rep.Unvouched, u)
		delete(checks, e.streamSeq) // a message read twice is listed once
	}
	rep.Intact = len(rep.Problems) == 0
}

// describeRecord names a record for a message: where it is in the stream
// and in the chain.
func describeRecord(e *auditEntry) string {
	switch {
	case e.rec.Side && e.rec.Action == protocol.ActionRefused:
		return fmt.Sprintf("refusal at stream seq %d (action %s)", e.streamSeq, e.rec.Action)
	case e.rec.Side:
		return fmt.Sprintf("side record at stream seq %d (action %s)", e.streamSeq, e.rec.Action)
	}
	return fmt.Sprintf("record at stream seq %d (seq %d, action %s)", e.streamSeq, e.rec.Seq, e.rec.Action)
}

// short abbreviates a hash for a message.
func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// shortOr is short, saying "nothing" for "".
func shortOr(h string) string {
	if h == "" {
		return `nothing ("")`
	}
	return short(h)
}

// batchSince returns up to n messages matching the filter stored at or
// after since (the server finds the first by time).
func (g directGet) batchSince(ctx context.Context, since time.Time, n int) (batchResult, error) {
	req, err := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
		NextBy    string    `json:"next_by_subj,omitempty"`
		Batch     int       `json:"batch"`
	}{StartTime: since.UTC(), NextBy: g.filter, Batch: n})
	if err != nil {
		return batchResult{}, err
	}
	return g.request(ctx, req, n)
}

// AuditSince returns the audit records of every run stored since a time,
// in stream order, at most limit of them (more is set when more were
// stored since): what a report of the team's decisions reads, bounded by
// its window, whatever the number of runs ever started. Messages that are
// not audit records are skipped. Like [Client.Audit], it does not check
// the records.
func (c *Client) AuditSince(ctx context.Context, since time.Time, limit int) (recs []protocol.AuditRecord, more bool, err error) {
	if limit <= 0 {
		return nil, false, errors.New("client: AuditSince needs a limit of one record or more")
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	stream := c.names.AuditStream()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: c.names.Prefix + ".audit.>", what: "stream " + stream}
	b, err := g.batchSince(ctx, since, min(auditBatch, limit))
	for err == nil {
		for _, m := range b.msgs {
			if len(recs) == limit {
				return recs, true, nil
			}
			if e := decodeAuditEntry(m); e.err == nil {
				recs = append(recs, e.rec)
			}
		}
		if len(b.msgs) == 0 || b.pending == 0 {
			return recs, false, nil
		}
		b, err = g.batch(ctx, b.msgs[len(b.msgs)-1].seq+1, auditBatch)
	}
	return nil, false, err
}
