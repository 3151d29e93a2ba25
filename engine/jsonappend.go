package engine

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file writes checkpoints and the data of the common events as JSON
// without reflection: byte for byte what json.Marshal writes for them
// (strings HTML-escaped, maps in key order, raw values compacted), at a
// fraction of its CPU. A worker writes a checkpoint twice per run and
// encodes each event twice (into the checkpoint's outbox, then onto its
// stream). Types written by hand here are held to json.Marshal field by
// field by TestAppendJSONIsWhatEncodingJSONWrites and FuzzCheckpointJSON;
// anything else goes through json.Marshal.

// AppendJSON appends the checkpoint's JSON document to dst: exactly what
// json.Marshal writes for it. Stores write checkpoints with it.
func (cp *Checkpoint) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, cp.Flow)
	w.str(`,"run":`, cp.Run)
	w.str(`,"status":`, string(cp.Status))
	w.strOmit(`,"node":`, cp.Node)
	w.rawMap(`,"state":`, cp.State, false)
	if cp.Interrupt != nil {
		w.lit(`,"interrupt":`)
		cp.Interrupt.appendJSON(&w)
	}
	w.strOmit(`,"error":`, cp.Error)
	w.time(`,"createdAt":`, cp.CreatedAt)
	w.time(`,"updatedAt":`, cp.UpdatedAt)
	w.rawOmit(`,"origin":`, cp.Origin)
	w.strOmit(`,"traceparent":`, cp.Traceparent)
	if len(cp.Resumes) > 0 {
		w.lit(`,"resumes":`)
		for i, r := range cp.Resumes {
			w.sep(i, '[')
			w.raw(r)
		}
		w.lit("]")
	}
	w.rawMap(`,"steps":`, cp.Steps, true)
	w.rawMap(`,"locals":`, cp.Locals, true)
	w.strOmit(`,"gatePassed":`, cp.GatePassed)
	if len(cp.Decisions) > 0 {
		w.value(`,"decisions":`, cp.Decisions)
	}
	if cp.Rejection != nil {
		w.value(`,"rejection":`, cp.Rejection)
	}
	if e := cp.Expired; e != nil {
		w.str(`,"expired":{"requestId":`, e.RequestID)
		w.str(`,"node":`, e.Node)
		w.str(`,"kind":`, e.Kind)
		w.time(`,"expiresAt":`, e.ExpiresAt)
		w.strOmit(`,"approverRole":`, e.ApproverRole)
		w.lit("}")
	}
	if a := cp.Audit; a != nil {
		w.uint(`,"audit":{"records":`, a.Records)
		w.str(`,"hash":`, a.Hash)
		w.lit("}")
	}
	if c := cp.Cause; c != nil {
		w.str(`,"cause":{"id":`, c.ID)
		w.str(`,"key":`, c.Key)
		w.uintOmit(`,"seq":`, c.Seq)
		w.boolOmit(`,"due":`, c.Due)
		w.lit("}")
	}
	w.strsOmit(`,"applied":`, cp.Applied)
	w.str(`,"uid":`, cp.UID)
	w.uint(`,"seq":`, cp.Seq)
	if len(cp.Outbox) > 0 {
		w.lit(`,"outbox":`)
		for i := range cp.Outbox {
			w.sep(i, '[')
			cp.Outbox[i].appendJSON(&w)
		}
		w.lit("]")
	}
	w.boolOmit(`,"waited":`, cp.Waited)
	w.lit("}")
	return w.b, w.err
}

// appendJSON writes the message as json.Marshal does.
func (m *Message) appendJSON(w *jsonWriter) {
	w.str(`{"stream":`, string(m.Stream))
	w.str(`,"kind":`, m.Kind)
	w.str(`,"id":`, m.ID)
	w.str(`,"flow":`, m.Flow)
	w.str(`,"run":`, m.Run)
	w.time(`,"time":`, m.Time)
	w.lit(`,"data":`)
	if a, ok := m.Data.(jsonAppender); ok {
		w.b, w.err = appendData(w.b, w.err, a)
	} else {
		w.value("", m.Data)
	}
	w.strOmit(`,"traceparent":`, m.Traceparent)
	w.lit("}")
}

// jsonAppender is event data written without reflection.
type jsonAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// appendData appends a's JSON unless an earlier write failed.
func appendData(dst []byte, err error, a jsonAppender) ([]byte, error) {
	if err != nil {
		return dst, err
	}
	return a.AppendJSON(dst)
}

// appendJSON writes the interrupt as json.Marshal does.
func (in *Interrupt) appendJSON(w *jsonWriter) {
	w.str(`{"requestId":`, in.RequestID)
	w.str(`,"node":`, in.Node)
	w.int(`,"index":`, int64(in.Index))
	w.str(`,"kind":`, in.Kind)
	appendQuestions(w, in.Questions)
	w.strsOmit(`,"fields":`, in.Fields)
	w.strOmit(`,"context":`, in.Context)
	w.rawMap(`,"answers":`, in.Answers, true)
	w.strOmit(`,"question":`, in.Question)
	appendOptions(w, in.Options)
	w.boolOmit(`,"multiple":`, in.Multiple)
	w.strsOmit(`,"selected":`, in.Selected)
	w.strOmit(`,"action":`, in.Action)
	w.rawOmit(`,"args":`, in.Args)
	w.strOmit(`,"reason":`, in.Reason)
	w.strOmit(`,"approverRole":`, in.ApproverRole)
	appendVerdicts(w, in.Decisions)
	w.strOmit(`,"gate":`, in.Gate)
	if in.Decision != nil {
		w.value(`,"decision":`, in.Decision)
	}
	w.strOmit(`,"error":`, in.Error)
	w.time(`,"askedAt":`, in.AskedAt)
	if in.ExpiresAt != nil {
		w.time(`,"expiresAt":`, *in.ExpiresAt)
	}
	if in.OnTimeout != nil {
		w.value(`,"onTimeout":`, in.OnTimeout)
	}
	if in.Escalations != 0 {
		w.int(`,"escalations":`, int64(in.Escalations))
	}
	w.strsOmit(`,"retired":`, in.Retired)
	w.lit("}")
}

func appendQuestions(w *jsonWriter, qs []Question) {
	if len(qs) == 0 {
		return
	}
	w.lit(`,"questions":`)
	for i := range qs {
		q := &qs[i]
		w.sep(i, '[')
		w.str(`{"field":`, q.Field)
		w.str(`,"question":`, q.Question)
		w.strsOmit(`,"suggestions":`, q.Suggestions)
		w.strOmit(`,"context":`, q.Context)
		w.lit("}")
	}
	w.lit("]")
}

func appendOptions(w *jsonWriter, opts []Option) {
	if len(opts) == 0 {
		return
	}
	w.lit(`,"options":`)
	for i, o := range opts {
		w.sep(i, '[')
		w.str(`{"id":`, o.ID)
		w.str(`,"label":`, o.Label)
		w.lit("}")
	}
	w.lit("]")
}

func appendVerdicts(w *jsonWriter, vs []Verdict) {
	if len(vs) == 0 {
		return
	}
	w.lit(`,"decisions":`)
	for i, v := range vs {
		w.sep(i, '[')
		w.str("", string(v))
	}
	w.lit("]")
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *StartedEvent) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, e.Flow)
	w.str(`,"run":`, e.Run)
	w.uint(`,"checkpoint":`, e.Checkpoint)
	w.rawOmit(`,"origin":`, e.Origin)
	w.lit("}")
	return w.b, w.err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *InterruptedEvent) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, e.Flow)
	w.str(`,"run":`, e.Run)
	w.str(`,"node":`, e.Node)
	w.str(`,"requestId":`, e.RequestID)
	w.strOmit(`,"resumeToken":`, e.ResumeToken)
	w.uint(`,"checkpoint":`, e.Checkpoint)
	w.str(`,"kind":`, e.Kind)
	appendQuestions(&w, e.Questions)
	w.strOmit(`,"context":`, e.Context)
	w.strOmit(`,"question":`, e.Question)
	appendOptions(&w, e.Options)
	if e.Multiple != nil {
		w.lit(`,"multiple":`)
		w.bool(*e.Multiple)
	}
	w.strOmit(`,"action":`, e.Action)
	w.rawOmit(`,"args":`, e.Args)
	w.strOmit(`,"reason":`, e.Reason)
	w.strOmit(`,"approverRole":`, e.ApproverRole)
	appendVerdicts(&w, e.Decisions)
	w.strOmit(`,"gate":`, e.Gate)
	w.strOmit(`,"error":`, e.Error)
	if e.ExpiresAt != nil {
		w.time(`,"expiresAt":`, *e.ExpiresAt)
	}
	w.rawOmit(`,"origin":`, e.Origin)
	w.lit("}")
	return w.b, w.err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *ResumedEvent) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, e.Flow)
	w.str(`,"run":`, e.Run)
	w.str(`,"node":`, e.Node)
	w.str(`,"requestId":`, e.RequestID)
	w.str(`,"kind":`, e.Kind)
	w.uint(`,"checkpoint":`, e.Checkpoint)
	w.strOmit(`,"decision":`, e.Decision)
	w.strOmit(`,"approver":`, e.Approver)
	w.strOmit(`,"reason":`, e.Reason)
	w.rawOmit(`,"edits":`, e.Edits)
	w.rawOmit(`,"origin":`, e.Origin)
	w.lit("}")
	return w.b, w.err
}

// AppendJSON appends the event's data as json.Marshal writes it.
func (e *CompletedEvent) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, e.Flow)
	w.str(`,"run":`, e.Run)
	w.uint(`,"checkpoint":`, e.Checkpoint)
	w.rawMap(`,"state":`, e.State, false)
	if e.Rejection != nil {
		w.value(`,"rejection":`, e.Rejection)
	}
	w.rawOmit(`,"origin":`, e.Origin)
	w.lit("}")
	return w.b, w.err
}

// AppendJSON appends the record as json.Marshal writes it.
func (e *AuditRecord) AppendJSON(dst []byte) ([]byte, error) {
	if e == nil {
		return append(dst, "null"...), nil
	}
	w := jsonWriter{b: dst}
	w.str(`{"flow":`, e.Flow)
	w.str(`,"run":`, e.Run)
	w.str(`,"action":`, e.Action)
	w.time(`,"at":`, e.At)
	w.strOmit(`,"by":`, e.By)
	w.strOmit(`,"source":`, e.Source)
	w.strOmit(`,"eventId":`, e.EventID)
	w.strOmit(`,"node":`, e.Node)
	w.strOmit(`,"requestId":`, e.RequestID)
	w.strOmit(`,"kind":`, e.Kind)
	w.boolOmit(`,"trusted":`, e.Trusted)
	w.strOmit(`,"reason":`, e.Reason)
	w.strOmit(`,"replaces":`, e.Replaces)
	w.strOmit(`,"approverRole":`, e.ApproverRole)
	w.strOmit(`,"escalatedFrom":`, e.EscalatedFrom)
	w.boolOmit(`,"timeout":`, e.Timeout)
	if a := e.Approval; a != nil {
		w.str(`,"approval":{"action":`, a.Action)
		w.rawOmit(`,"args":`, a.Args)
		w.rawOmit(`,"edits":`, a.Edits)
		w.rawOmit(`,"final":`, a.Final)
		w.lit("}")
	}
	if e.ExpiresAt != nil {
		w.time(`,"expiresAt":`, *e.ExpiresAt)
	}
	w.strOmit(`,"code":`, e.Code)
	if o := e.Outcome; o != nil {
		w.str(`,"outcome":{"status":`, string(o.Status))
		w.strOmit(`,"node":`, o.Node)
		w.strOmit(`,"requestId":`, o.RequestID)
		w.strOmit(`,"kind":`, o.Kind)
		w.strOmit(`,"error":`, o.Error)
		w.lit("}")
	}
	w.uintOmit(`,"seq":`, e.Seq)
	w.strOmit(`,"prev":`, e.Prev)
	w.boolOmit(`,"side":`, e.Side)
	w.strOmit(`,"hash":`, e.Hash)
	w.strOmit(`,"kid":`, e.Kid)
	w.strOmit(`,"sig":`, e.Sig)
	w.lit("}")
	return w.b, w.err
}

// jsonWriter appends JSON to b; the first error stops it. Each method
// writes its prefix (a member's `,"name":`) and then the value.
type jsonWriter struct {
	b   []byte
	err error
	// canonical writes strings as the canonical form has them: invalid
	// UTF-8 replaced by U+FFFD itself, not escaped (see [CanonicalHash]).
	canonical bool
}

func (w *jsonWriter) lit(s string) { w.b = append(w.b, s...) }

// sep writes open before a list's first element and a comma before the
// others.
func (w *jsonWriter) sep(i int, open byte) {
	if i == 0 {
		w.b = append(w.b, open)
	} else {
		w.b = append(w.b, ',')
	}
}

func (w *jsonWriter) str(prefix, s string) {
	if w.canonical && !utf8.ValidString(s) {
		s = string([]rune(s)) // each invalid byte a U+FFFD, as encoding/json decodes it
	}
	w.b = appendJSONString(append(w.b, prefix...), s)
}

func (w *jsonWriter) strOmit(prefix, s string) {
	if s != "" {
		w.str(prefix, s)
	}
}

func (w *jsonWriter) strsOmit(prefix string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.lit(prefix)
	for i, s := range ss {
		w.sep(i, '[')
		w.b = appendJSONString(w.b, s)
	}
	w.lit("]")
}

func (w *jsonWriter) uint(prefix string, n uint64) {
	w.b = strconv.AppendUint(append(w.b, prefix...), n, 10)
}

func (w *jsonWriter) uintOmit(prefix string, n uint64) {
	if n != 0 {
		w.uint(prefix, n)
	}
}

func (w *jsonWriter) int(prefix string, n int64) {
	w.b = strconv.AppendInt(append(w.b, prefix...), n, 10)
}

func (w *jsonWriter) bool(v bool) {
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jsonWriter) boolOmit(prefix string, v bool) {
	if v {
		w.lit(prefix)
		w.bool(v)
	}
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds; an error for a year outside 0-9999).
func (w *jsonWriter) time(prefix string, t time.Time) {
	w.b = append(append(w.b, prefix...), '"')
	b, err := t.AppendText(w.b)
	if err != nil {
		w.fail(err)
		return
	}
	w.b = append(b, '"')
}

// raw writes a raw JSON value as json.Marshal does: nil as null, and a
// value with space or HTML characters in it compacted and escaped.
func (w *jsonWriter) raw(r json.RawMessage) {
	switch {
	case r == nil:
		w.lit("null")
	case rawClean(r) && json.Valid(r):
		w.b = append(w.b, r...)
	default:
		w.value("", r)
	}
}

func (w *jsonWriter) rawOmit(prefix string, r json.RawMessage) {
	if len(r) > 0 {
		w.lit(prefix)
		w.raw(r)
	}
}

// canonicalRaw writes a raw value, unless empty, in canonical form (see
// [CanonicalHash]).
func (w *jsonWriter) canonicalRaw(prefix string, r json.RawMessage) {
	if len(r) == 0 || w.err != nil {
		return
	}
	compact := jsonWriter{}
	if compact.raw(r); compact.err != nil {
		w.fail(compact.err)
		return
	}
	c := canonicalizer{dst: append(w.b, prefix...)}
	c.value(compact.b)
	w.b = c.dst
}

// rawMap writes a map of raw values with its keys in order; a nil map is
// null, or left out with omit, as an empty one is.
func (w *jsonWriter) rawMap(prefix string, m map[string]json.RawMessage, omit bool) {
	if omit && len(m) == 0 {
		return
	}
	w.lit(prefix)
	if m == nil {
		w.lit("null")
		return
	}
	if len(m) == 0 {
		w.lit("{}")
		return
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		w.sep(i, '{')
		w.b = append(appendJSONString(w.b, k), ':')
		w.raw(m[k])
	}
	w.lit("}")
}

// value writes v with json.Marshal.
func (w *jsonWriter) value(prefix string, v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.fail(err)
		return
	}
	w.b = append(append(w.b, prefix...), b...)
}

func (w *jsonWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// rawClean reports whether a raw value, if valid, is as json.Marshal
// writes it: no space to compact, no character it escapes.
func rawClean(r []byte) bool {
	for _, c := range r {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// appendJSONString appends s quoted as encoding/json writes a string:
// HTML characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return appendJSONStringSlow(dst, s)
			}
			i += n
			continue
		}
		if c < ' ' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSONStringSlow(dst, s)
		}
		i++
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendJSONStringSlow is appendJSONString for a string with something to
// escape.
func appendJSONStringSlow(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}
