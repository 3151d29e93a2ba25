package protocol

// This file writes the data of the common events and audit records as
// JSON without reflection: byte for byte what json.Marshal writes for
// them (strings HTML-escaped, maps in key order, raw values compacted), at
// a fraction of its CPU, and computes the audit hash. Types written by
// hand here are held to json.Marshal field by field by
// TestAppendJSONIsWhatEncodingJSONWrites; anything else goes through
// json.Marshal.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/interlockhq/interlock/internal/jsonw"
)

// WriteQuestions writes a question interrupt's questions, as a
// `,"questions":` member, unless there are none.
func WriteQuestions(w *jsonw.Writer, qs []Question) {
	if len(qs) == 0 {
		return
	}
	w.Lit(`,"questions":`)
	for i := range qs {
		q := &qs[i]
		w.Sep(i, '[')
		w.Str(`{"field":`, q.Field)
		w.Str(`,"question":`, q.Question)
		w.StrOmit(`,"type":`, q.Type)
		w.StrsOmit(`,"suggestions":`, q.Suggestions)
		w.StrOmit(`,"context":`, q.Context)
		w.RawOmit(`,"schema":`, q.Schema)
		w.Lit("}")
	}
	w.Lit("]")
}

// WritePolicy writes a deadline's policy, as an `,"onTimeout":` member,
// unless it is nil.
func WritePolicy(w *jsonw.Writer, p *Policy) {
	if p == nil {
		return
	}
	w.Lit(`,"onTimeout":`)
	writePolicy(w, p)
}

func writePolicy(w *jsonw.Writer, p *Policy) {
	w.Lit("{")
	n := len(w.B)
	w.StrOmit(`,"action":`, p.Action)
	w.StrOmit(`,"approverRole":`, p.ApproverRole)
	w.StrOmit(`,"timeout":`, p.Timeout)
	if p.Then != nil {
		w.Lit(`,"then":`)
		writePolicy(w, p.Then)
	}
	if len(w.B) > n {
		w.B = append(w.B[:n], w.B[n+1:]...) // the first member's comma
	}
	w.Lit("}")
}

// WriteOptions writes a choice's options, as a `,"options":` member,
// unless there are none.
func WriteOptions(w *jsonw.Writer, opts []Option) {
	if len(opts) == 0 {
		return
	}
	w.Lit(`,"options":`)
	for i, o := range opts {
		w.Sep(i, '[')
		w.Str(`{"id":`, o.ID)
		w.Str(`,"label":`, o.Label)
		w.Lit("}")
	}
	w.Lit("]")
}

// WriteVerdicts writes an approval's decisions, as a `,"decisions":`
// member, unless there are none.
func WriteVerdicts(w *jsonw.Writer, vs []Verdict) {
	if len(vs) == 0 {
		return
	}
	w.Lit(`,"decisions":`)
	for i, v := range vs {
		w.Sep(i, '[')
		w.Str("", string(v))
	}
	w.Lit("]")
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *Started) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, e.Flow)
	w.Str(`,"run":`, e.Run)
	w.Uint(`,"checkpoint":`, e.Checkpoint)
	w.RawOmit(`,"origin":`, e.Origin)
	w.Lit("}")
	return w.B, w.Err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *Interrupted) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, e.Flow)
	w.Str(`,"run":`, e.Run)
	w.Str(`,"node":`, e.Node)
	w.Str(`,"requestId":`, e.RequestID)
	w.StrOmit(`,"resumeToken":`, e.ResumeToken)
	w.Uint(`,"checkpoint":`, e.Checkpoint)
	w.Str(`,"kind":`, e.Kind)
	WriteQuestions(&w, e.Questions)
	w.StrOmit(`,"context":`, e.Context)
	w.StrOmit(`,"question":`, e.Question)
	WriteOptions(&w, e.Options)
	if e.Multiple != nil {
		w.Lit(`,"multiple":`)
		w.Bool(*e.Multiple)
	}
	w.StrOmit(`,"action":`, e.Action)
	w.RawOmit(`,"args":`, e.Args)
	w.StrOmit(`,"reason":`, e.Reason)
	w.StrOmit(`,"approverRole":`, e.ApproverRole)
	WriteVerdicts(&w, e.Decisions)
	w.BoolOmit(`,"rejectReasonRequired":`, e.RejectReasonRequired)
	w.StrOmit(`,"gate":`, e.Gate)
	w.StrOmit(`,"error":`, e.Error)
	w.StrsOmit(`,"assignees":`, e.Assignees)
	w.StrOmit(`,"claimedBy":`, e.ClaimedBy)
	w.StrOmit(`,"requester":`, e.Requester)
	if e.Quorum != nil {
		w.Value(`,"quorum":`, e.Quorum)
	}
	w.BoolOmit(`,"separationOfDuties":`, e.SeparationOfDuties)
	if len(e.Votes) > 0 {
		w.Value(`,"votes":`, e.Votes)
	}
	w.StrOmit(`,"title":`, e.Title)
	w.StrOmit(`,"description":`, e.Description)
	w.RawOmit(`,"argsSchema":`, e.ArgsSchema)
	if e.ExpiresAt != nil {
		w.Time(`,"expiresAt":`, *e.ExpiresAt)
	}
	WritePolicy(&w, e.OnTimeout)
	w.RawOmit(`,"origin":`, e.Origin)
	w.Lit("}")
	return w.B, w.Err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *Resumed) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, e.Flow)
	w.Str(`,"run":`, e.Run)
	w.Str(`,"node":`, e.Node)
	w.Str(`,"requestId":`, e.RequestID)
	w.Str(`,"kind":`, e.Kind)
	w.Uint(`,"checkpoint":`, e.Checkpoint)
	w.StrOmit(`,"decision":`, e.Decision)
	w.StrOmit(`,"approver":`, e.Approver)
	w.StrOmit(`,"reason":`, e.Reason)
	w.RawOmit(`,"edits":`, e.Edits)
	w.StrOmit(`,"message":`, e.Message)
	w.RawOmit(`,"origin":`, e.Origin)
	w.StrOmit(`,"receipt":`, e.Receipt)
	w.Lit("}")
	return w.B, w.Err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *Completed) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, e.Flow)
	w.Str(`,"run":`, e.Run)
	w.Uint(`,"checkpoint":`, e.Checkpoint)
	w.Lit(`,"state":`)
	w.Raw(e.State)
	if e.Rejection != nil {
		w.Value(`,"rejection":`, e.Rejection)
	}
	w.RawOmit(`,"origin":`, e.Origin)
	w.Lit("}")
	return w.B, w.Err
}

// AppendJSON appends the record as json.Marshal writes it.
func (e *AuditRecord) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, e.Flow)
	w.Str(`,"run":`, e.Run)
	w.Str(`,"action":`, e.Action)
	w.Time(`,"at":`, e.At)
	w.StrOmit(`,"by":`, e.By)
	w.StrOmit(`,"source":`, e.Source)
	w.StrOmit(`,"eventId":`, e.EventID)
	w.StrOmit(`,"node":`, e.Node)
	w.StrOmit(`,"requestId":`, e.RequestID)
	w.StrOmit(`,"kind":`, e.Kind)
	w.BoolOmit(`,"trusted":`, e.Trusted)
	w.StrOmit(`,"auth":`, string(e.Auth))
	w.StrOmit(`,"named":`, e.Named)
	w.StrOmit(`,"reason":`, e.Reason)
	w.StrOmit(`,"message":`, e.Message)
	w.StrOmit(`,"to":`, e.To)
	w.StrOmit(`,"replaces":`, e.Replaces)
	w.StrOmit(`,"approverRole":`, e.ApproverRole)
	w.StrOmit(`,"escalatedFrom":`, e.EscalatedFrom)
	w.BoolOmit(`,"timeout":`, e.Timeout)
	appendApproval(&w, e.Approval)
	if e.ExpiresAt != nil {
		w.Time(`,"expiresAt":`, *e.ExpiresAt)
	}
	if m := e.Migration; m != nil {
		w.Str(`,"migration":{"from":`, m.From)
		w.Str(`,"to":`, m.To)
		w.StrOmit(`,"node":`, m.Node)
		w.Lit("}")
	}
	w.StrOmit(`,"code":`, string(e.Code))
	if o := e.Outcome; o != nil {
		w.Str(`,"outcome":{"status":`, string(o.Status))
		w.StrOmit(`,"node":`, o.Node)
		w.StrOmit(`,"requestId":`, o.RequestID)
		w.StrOmit(`,"kind":`, o.Kind)
		w.StrOmit(`,"approverRole":`, o.ApproverRole)
		if o.ExpiresAt != nil {
			w.Time(`,"expiresAt":`, *o.ExpiresAt)
		}
		w.StrOmit(`,"reason":`, o.Reason)
		appendApproval(&w, o.Approval)
		w.StrOmit(`,"error":`, o.Error)
		w.Lit("}")
	}
	w.UintOmit(`,"seq":`, e.Seq)
	w.StrOmit(`,"prev":`, e.Prev)
	w.BoolOmit(`,"side":`, e.Side)
	w.StrOmit(`,"hash":`, e.Hash)
	w.StrOmit(`,"kid":`, e.Kid)
	w.StrOmit(`,"sig":`, e.Sig)
	w.Lit("}")
	return w.B, w.Err
}

// AuditHash returns the hash of an audit record: the hex SHA-256 of its
// canonical JSON (object keys sorted, no insignificant space, numbers as
// written) without its hash and sig fields. Anyone can recompute it from
// the record as published. The hash covers the kid, naming the key, and
// the signature (sig) is over the hash.
func AuditHash(rec *AuditRecord) (string, error) {
	b, err := rec.appendCanonical(make([]byte, 0, 512))
	if err != nil {
		return "", fmt.Errorf("protocol: encoding audit record: %w", err)
	}
	return hashHex(b), nil
}

// appendCanonical appends the record's canonical JSON without its hash
// and signature:
// what [CanonicalHash] hashes of the record as json.Marshal writes it,
// written directly (its members in key order).
func (e *AuditRecord) appendCanonical(dst []byte) ([]byte, error) {
	w := jsonw.Writer{B: dst, Canonical: true}
	w.Str(`{"action":`, e.Action)
	appendCanonicalApproval(&w, e.Approval)
	w.StrOmit(`,"approverRole":`, e.ApproverRole)
	w.Time(`,"at":`, e.At)
	w.StrOmit(`,"auth":`, string(e.Auth))
	w.StrOmit(`,"by":`, e.By)
	w.StrOmit(`,"code":`, string(e.Code))
	w.StrOmit(`,"escalatedFrom":`, e.EscalatedFrom)
	w.StrOmit(`,"eventId":`, e.EventID)
	if e.ExpiresAt != nil {
		w.Time(`,"expiresAt":`, *e.ExpiresAt)
	}
	w.Str(`,"flow":`, e.Flow)
	w.StrOmit(`,"kid":`, e.Kid)
	w.StrOmit(`,"kind":`, e.Kind)
	w.StrOmit(`,"message":`, e.Message)
	if m := e.Migration; m != nil {
		w.Str(`,"migration":{"from":`, m.From)
		w.StrOmit(`,"node":`, m.Node)
		w.Str(`,"to":`, m.To)
		w.Lit("}")
	}
	w.StrOmit(`,"named":`, e.Named)
	w.StrOmit(`,"node":`, e.Node)
	if o := e.Outcome; o != nil {
		w.Lit(`,"outcome":`)
		n := len(w.B)
		appendCanonicalApproval(&w, o.Approval)
		w.StrOmit(`,"approverRole":`, o.ApproverRole)
		w.StrOmit(`,"error":`, o.Error)
		if o.ExpiresAt != nil {
			w.Time(`,"expiresAt":`, *o.ExpiresAt)
		}
		w.StrOmit(`,"kind":`, o.Kind)
		w.StrOmit(`,"node":`, o.Node)
		w.StrOmit(`,"reason":`, o.Reason)
		w.StrOmit(`,"requestId":`, o.RequestID)
		w.Str(`,"status":`, string(o.Status))
		w.B[n] = '{' // the first member's comma
		w.Lit("}")
	}
	w.StrOmit(`,"prev":`, e.Prev)
	w.StrOmit(`,"reason":`, e.Reason)
	w.StrOmit(`,"replaces":`, e.Replaces)
	w.StrOmit(`,"requestId":`, e.RequestID)
	w.Str(`,"run":`, e.Run)
	w.UintOmit(`,"seq":`, e.Seq)
	w.BoolOmit(`,"side":`, e.Side)
	w.StrOmit(`,"source":`, e.Source)
	w.BoolOmit(`,"timeout":`, e.Timeout)
	w.StrOmit(`,"to":`, e.To)
	w.BoolOmit(`,"trusted":`, e.Trusted)
	w.Lit("}")
	return w.B, w.Err
}

// appendApproval appends a record's approval member, if any, as
// json.Marshal writes it.
func appendApproval(w *jsonw.Writer, a *AuditApproval) {
	if a == nil {
		return
	}
	w.Str(`,"approval":{"action":`, a.Action)
	w.RawOmit(`,"args":`, a.Args)
	w.RawOmit(`,"edits":`, a.Edits)
	w.RawOmit(`,"final":`, a.Final)
	w.Lit("}")
}

// appendCanonicalApproval appends a record's approval member, if any, in
// canonical JSON.
func appendCanonicalApproval(w *jsonw.Writer, a *AuditApproval) {
	if a == nil {
		return
	}
	w.Str(`,"approval":{"action":`, a.Action)
	w.CanonicalRaw(`,"args":`, a.Args)
	w.CanonicalRaw(`,"edits":`, a.Edits)
	w.CanonicalRaw(`,"final":`, a.Final)
	w.Lit("}")
}

// CanonicalHash returns the hex SHA-256 of the canonical JSON of a JSON
// object, leaving out its "hash" and "sig" members (an audit record's hash
// and the signature over it).
//
// The canonical JSON is what encoding/json writes for the object decoded
// into a map (with numbers kept as written): keys sorted, the last of a
// repeated key kept, strings escaped as encoding/json escapes them. A
// valid object is written so in one pass; anything else is decoded.
func CanonicalHash(obj []byte) (string, error) {
	if json.Valid(obj) {
		if b, ok := jsonw.Canonical(make([]byte, 0, len(obj)), obj, unhashed); ok {
			return hashHex(b), nil
		}
	}
	return canonicalHashDecoded(obj)
}

// canonicalHashDecoded is CanonicalHash by decoding the object into a map
// and encoding it again.
func canonicalHashDecoded(obj []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", fmt.Errorf("protocol: audit record is not a JSON object: %v", err)
	}
	delete(m, "hash")
	delete(m, "sig")
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("protocol: encoding audit record: %w", err)
	}
	return hashHex(b), nil
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// unhashed reports whether a top-level member is left out of an audit
// record's hash: the hash itself and the signature over it.
func unhashed(key string) bool { return key == "hash" || key == "sig" }
