package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/events"
)

// auditBatch is how many records one batched read of the audit stream asks for.
const auditBatch = 256

// AuditHash returns the hash of an audit record as Interlock computes it:
// the hex SHA-256 of the record's canonical JSON, which is the record
// decoded (numbers as written), its "hash" and "sig" members removed, and
// encoded again with object keys sorted and no insignificant space.
// record is the data of an audit event as stored (events.AuditRecord.Data).
// The record's signature (sig) is over this hash.
func AuditHash(record []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(record))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return "", fmt.Errorf("client: audit record is not a JSON object: %w", err)
	}
	if m == nil {
		return "", errors.New("client: audit record is null, not a JSON object")
	}
	delete(m, "hash")
	delete(m, "sig")
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("client: encoding audit record: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// auditEntry is one message of a run's audit subject: the record, or why
// it is none.
type auditEntry struct {
	streamSeq uint64
	rec       events.AuditRecord
	err       error
}

// Audit returns every record on a run's audit subject
// (<prefix>.audit.<flow>.<run>), in stream order, read with batched direct
// gets of the audit stream (no consumer). Records that aged out of the
// stream (serve's --audit-max-age) are not returned. A run with no record
// and no checkpoint is an error wrapping [ErrNotFound]; a message on the
// subject that is not an audit record is an error naming its sequence
// (VerifyAudit reports it as a break instead).
func (c *Client) Audit(ctx context.Context, flow, run string) ([]events.AuditRecord, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	entries, err := c.auditEntries(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	recs := make([]events.AuditRecord, 0, len(entries))
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
	if e.rec, err = events.DecodeAuditRecord(ev.Data()); err != nil {
		e.err = err
		return e
	}
	e.rec.StreamSeq, e.rec.EventType = m.seq, ev.Type()
	return e
}

// Checks an [AuditProblem] names.
const (
	// CheckRecord: the message is not an audit record, or names another run.
	CheckRecord = "record"
	// CheckType: the CloudEvent type is not io.interlock.audit.<action>.
	CheckType = "type"
	// CheckHash: the record's hash is missing or does not match its contents.
	CheckHash = "hash"
	// CheckSeq: a chained record is not at the next position.
	CheckSeq = "seq"
	// CheckPrev: a record's prev is not the hash of the record before it
	// (for a refusal: of any record of the chain before it).
	CheckPrev = "prev"
	// CheckMissing: records are missing from the stream.
	CheckMissing = "missing"
	// CheckHead: the chain's last record is not the checkpoint's head.
	CheckHead = "head"
)

// AuditProblem is a place where a run's audit chain breaks.
type AuditProblem struct {
	// Check is what failed: CheckRecord, CheckType, CheckHash, CheckSeq,
	// CheckPrev, CheckMissing or CheckHead.
	Check string `json:"check"`
	// StreamSeq is the message's sequence in the audit stream; 0 when the
	// problem is records the stream lacks.
	StreamSeq uint64 `json:"streamSeq,omitempty"`
	// Record is the record's position in the chain (0 for a refusal).
	Record uint64 `json:"record,omitempty"`
	Action string `json:"action,omitempty"`
	// Expected and Found are what the check wanted and what it read
	// (hashes in full, positions as numbers).
	Expected string `json:"expected,omitempty"`
	Found    string `json:"found,omitempty"`
	// Message says it in words, with short hashes.
	Message string `json:"message"`
}

// AuditReport is what [Client.VerifyAudit] found.
type AuditReport struct {
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Intact is true when nothing is in Problems: every record's hash
	// matches its contents, the chained records follow each other without
	// a gap, each naming the one before, every refusal names a record of
	// the chain, and the last record is the checkpoint's head (when the
	// checkpoint could be read).
	Intact bool `json:"intact"`
	// Records counts the chained records read, Refusals the side records.
	Records  int `json:"records"`
	Refusals int `json:"refusals"`
	// FirstRecord is the position of the first chained record read: 1,
	// unless older records aged out of the stream.
	FirstRecord uint64 `json:"firstRecord,omitempty"`
	// Head is the last chained record read.
	Head events.AuditHead `json:"head"`
	// Checkpoint is the head the run's checkpoint records, nil when the
	// checkpoint is gone or holds none; HeadCompared says whether Head was
	// compared with it.
	Checkpoint   *events.AuditHead `json:"checkpoint,omitempty"`
	HeadCompared bool              `json:"headCompared"`
	// Notes say what the check could not cover, or found unusual but sound.
	Notes []string `json:"notes,omitempty"`
	// Problems are where the chain breaks, in stream order.
	Problems []AuditProblem `json:"problems,omitempty"`
}

// VerifyAudit reads a run's audit records and checks their hash chain:
// each record's hash against its contents; each chained record's position
// (1, 2, 3, ... from the first record the stream still holds) and prev
// (the hash of the chained record before it, "" for the first); each
// refusal's prev (a hash of the chain before it); and the last chained
// record against the head in the run's checkpoint, when the checkpoint
// still exists.
//
// A broken chain is not an error: the report says where it breaks. The
// error is for what kept the check from running (no such run, an
// unreachable server). While the run moves, or while a transition's
// records are still being published, VerifyAudit reads again, up to the
// client's wait.
func (c *Client) VerifyAudit(ctx context.Context, flow, run string) (AuditReport, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if err := CheckName("flow", flow); err != nil {
		return AuditReport{}, err
	}
	if err := CheckName("run", run); err != nil {
		return AuditReport{}, err
	}
	stream := c.names.AuditStream()
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return AuditReport{}, fmt.Errorf("client: binding %s (has `interlock serve` run once, with the same --prefix?): %w", stream, err)
	}
	// Records leave the stream only from its front, by age or limits: the
	// deletes and purges are denied.
	dropped := s.CachedInfo().State.FirstSeq > 1
	deadline := time.Now().Add(c.wait)
	poll := firstPoll
	for {
		before, found, err := c.auditHead(ctx, flow, run)
		if err != nil {
			return AuditReport{}, err
		}
		entries, err := c.auditEntries(ctx, flow, run)
		if err != nil {
			return AuditReport{}, err
		}
		after, foundAfter, err := c.auditHead(ctx, flow, run)
		if err != nil {
			return AuditReport{}, err
		}
		if !foundAfter && len(entries) == 0 {
			return AuditReport{}, c.notFound(ctx, flow, run)
		}
		moved := found != foundAfter || before.rev != after.rev
		rep := checkChain(flow, run, stream, entries, chainHead{found: foundAfter, head: after.head}, dropped)
		if (!moved && !behind(rep)) || time.Now().After(deadline) {
			return rep, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return AuditReport{}, ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, maxPoll)
	}
}

// behind reports whether the report's only trouble may be records still
// being published: the checkpoint's head is past the last record read.
func behind(rep AuditReport) bool {
	return len(rep.Problems) == 1 && rep.Problems[0].Check == CheckMissing && rep.Problems[0].StreamSeq == 0 && rep.HeadCompared
}

// runHead is a checkpoint's audit head and revision.
type runHead struct {
	rev  uint64
	head *events.AuditHead
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
	found bool              // the checkpoint exists
	head  *events.AuditHead // nil when it records no head
}

// checkChain checks the records of a run's audit subject, in stream
// order, against each other and against the checkpoint's head. dropped
// says whether the stream has lost messages from its front (by age).
func checkChain(flow, run, stream string, entries []auditEntry, cp chainHead, dropped bool) AuditReport {
	rep := AuditReport{Flow: flow, Run: run}
	problem := func(p AuditProblem) { rep.Problems = append(rep.Problems, p) }
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
		last     *auditEntry                // the last chained record
		bySeq    = map[uint64]*auditEntry{} // chained records of the current chain
		seen     = map[string]bool{}        // hashes of the current chain
		finished bool                       // the last record ended the run
	)
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
		if rec.Flow != flow || rec.Run != run {
			p := base
			p.Check, p.Expected, p.Found = CheckRecord, flow+" "+run, rec.Flow+" "+rec.Run
			p.Message = fmt.Sprintf("%s: names run %s of flow %s, not run %s of flow %s", where, rec.Run, rec.Flow, run, flow)
			problem(p)
		}
		if want := events.AuditType(rec.Action); rec.EventType != want {
			p := base
			p.Check, p.Expected, p.Found = CheckType, want, rec.EventType
			p.Message = fmt.Sprintf("%s: came as a CloudEvent of type %s, not %s", where, rec.EventType, want)
			problem(p)
		}
		sum, err := AuditHash(rec.Data)
		switch {
		case rec.Hash == "":
			p := base
			p.Check, p.Expected, p.Found = CheckHash, sum, ""
			p.Message = where + ": has no hash, so nothing chains it"
			problem(p)
		case err != nil:
			p := base
			p.Check, p.Found = CheckHash, rec.Hash
			p.Message = fmt.Sprintf("%s: its hash cannot be computed: %v", where, err)
			problem(p)
		case sum != rec.Hash:
			p := base
			p.Check, p.Expected, p.Found = CheckHash, sum, rec.Hash
			p.Message = fmt.Sprintf("%s: hash does not match its contents — the record was altered (it says %s, its contents hash to %s)", where, short(rec.Hash), short(sum))
			problem(p)
		}

		if rec.Side {
			rep.Refusals++
			ok := seen[rec.Prev]
			if last == nil {
				ok = rec.Prev == genesis
			}
			if !ok {
				p := base
				p.Check, p.Found = CheckPrev, rec.Prev
				if last == nil {
					p.Expected = genesis
					p.Message = fmt.Sprintf("%s: prev names %s, but no record of the chain comes before it", where, shortOr(rec.Prev))
				} else {
					p.Expected = last.rec.Hash
					p.Message = fmt.Sprintf("%s: prev names %s, which is no record of the chain before it (the head then was record %d, %s)", where, shortOr(rec.Prev), last.rec.Seq, short(last.rec.Hash))
				}
				problem(p)
			}
			if rec.Seq != 0 {
				p := base
				p.Check, p.Expected, p.Found = CheckSeq, "0", fmt.Sprint(rec.Seq)
				p.Message = fmt.Sprintf("%s: a refusal takes no position in the chain, but this one claims seq %d", where, rec.Seq)
				problem(p)
			}
			continue
		}

		rep.Records++
		switch {
		case last == nil:
			rep.FirstRecord = rec.Seq
			switch {
			case rec.Seq == 0:
				p := base
				p.Check, p.Expected, p.Found = CheckSeq, "1", "0"
				p.Message = where + ": has no position in the chain (seq), and is no refusal"
				problem(p)
			case rec.Seq == 1 && rec.Prev != "":
				p := base
				p.Check, p.Expected, p.Found = CheckPrev, "", rec.Prev
				p.Message = fmt.Sprintf("%s: prev names %s, but the first record of a chain names none", where, short(rec.Prev))
				problem(p)
			case rec.Seq > 1 && !dropped:
				p := base
				p.Check, p.Expected, p.Found = CheckMissing, "1", fmt.Sprint(rec.Seq)
				p.Message = fmt.Sprintf("%s: the chain starts at record %d, but %s has dropped no message: records 1 to %d were never in it", where, rec.Seq, stream, rec.Seq-1)
				problem(p)
			case rec.Seq > 1:
				seen[rec.Prev] = true // the head before the records still held
				rep.Notes = append(rep.Notes, fmt.Sprintf("the chain starts at record %d (stream seq %d): records 1 to %d have aged out of %s; checked from there", rec.Seq, e.streamSeq, rec.Seq-1, stream))
			}
		case rec.Seq == last.rec.Seq && rec.Hash == last.rec.Hash && bytes.Equal(rec.Data, last.rec.Data):
			rep.Records--
			rep.Notes = append(rep.Notes, fmt.Sprintf("record %d is in the stream twice, the same both times (stream seq %d and %d): a repeated publish", rec.Seq, last.streamSeq, e.streamSeq))
			continue
		case rec.Seq == 1 && rec.Prev == "" && rec.Action == events.AuditStarted && finished:
			// A finished run's checkpoint was removed and its id used again.
			rep.Notes = append(rep.Notes, fmt.Sprintf("the run id was used again: a new run's chain starts at stream seq %d, after the earlier run ended at record %d", e.streamSeq, last.rec.Seq))
			bySeq, seen = map[uint64]*auditEntry{}, map[string]bool{}
		default:
			if want := last.rec.Seq + 1; rec.Seq != want {
				p := base
				p.Check, p.Expected, p.Found = CheckSeq, fmt.Sprint(want), fmt.Sprint(rec.Seq)
				p.Message = fmt.Sprintf("%s: expected seq %d after record %d (stream seq %d)", where, want, last.rec.Seq, last.streamSeq)
				problem(p)
			}
			if rec.Prev != last.rec.Hash {
				p := base
				p.Check, p.Expected, p.Found = CheckPrev, last.rec.Hash, rec.Prev
				p.Message = fmt.Sprintf("%s: prev names %s, but the record before it (seq %d, stream seq %d) has hash %s", where, shortOr(rec.Prev), last.rec.Seq, last.streamSeq, short(last.rec.Hash))
				problem(p)
			}
		}
		seen[rec.Hash] = true
		if _, dup := bySeq[rec.Seq]; !dup {
			bySeq[rec.Seq] = e
		}
		last = e
		finished = rec.Outcome != nil && finishedStatus(rec.Outcome.Status)
	}
	if last != nil {
		rep.Head = events.AuditHead{Records: last.rec.Seq, Hash: last.rec.Hash}
	}

	switch {
	case !cp.found:
		rep.Notes = append(rep.Notes, "the run's checkpoint is gone (a finished run's is removed after serve's --keep-finished), so the head could not be compared with it")
	case cp.head == nil:
		rep.Notes = append(rep.Notes, "the run's checkpoint records no audit head, so the head could not be compared with it")
	default:
		h := *cp.head
		rep.Checkpoint, rep.HeadCompared = &h, true
		p := AuditProblem{Expected: fmt.Sprintf("%d %s", h.Records, h.Hash)}
		switch {
		case last == nil:
			if h.Records > 0 {
				p.Check, p.Found = CheckMissing, "0"
				p.Message = fmt.Sprintf("the checkpoint's head is record %d (%s), but %s holds no record of the run", h.Records, short(h.Hash), stream)
				rep.Problems = append(rep.Problems, p)
			}
		case last.rec.Seq == h.Records && last.rec.Hash == h.Hash:
		case last.rec.Seq > h.Records:
			next := bySeq[h.Records+1]
			if next == nil {
				next = last
			}
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
	rep.Intact = len(rep.Problems) == 0
	return rep
}

// describeRecord names a record for a message: where it is in the stream
// and in the chain.
func describeRecord(e *auditEntry) string {
	if e.rec.Side {
		return fmt.Sprintf("refusal at stream seq %d (action %s)", e.streamSeq, e.rec.Action)
	}
	return fmt.Sprintf("record at stream seq %d (seq %d, action %s)", e.streamSeq, e.rec.Seq, e.rec.Action)
}

func finishedStatus(s string) bool {
	switch s {
	case events.StatusCompleted, events.StatusFailed, events.StatusCancelled, events.StatusExpired:
		return true
	}
	return false
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
