package engine

import (
	"github.com/interlockhq/interlock/internal/jsonw"
	"github.com/interlockhq/interlock/protocol"
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
	w := jsonw.Writer{B: dst}
	w.Str(`{"flow":`, cp.Flow)
	w.Str(`,"run":`, cp.Run)
	w.Str(`,"status":`, string(cp.Status))
	w.StrOmit(`,"node":`, cp.Node)
	w.RawMap(`,"state":`, cp.State, false)
	if cp.Interrupt != nil {
		w.Lit(`,"interrupt":`)
		cp.Interrupt.appendJSON(&w)
	}
	w.StrOmit(`,"error":`, cp.Error)
	w.Time(`,"createdAt":`, cp.CreatedAt)
	w.Time(`,"updatedAt":`, cp.UpdatedAt)
	w.RawOmit(`,"origin":`, cp.Origin)
	w.StrOmit(`,"traceparent":`, cp.Traceparent)
	w.StrOmit(`,"startedBy":`, cp.StartedBy)
	w.StrOmit(`,"flowVersion":`, cp.FlowVersion)
	if len(cp.Resumes) > 0 {
		w.Lit(`,"resumes":`)
		for i, r := range cp.Resumes {
			w.Sep(i, '[')
			w.Raw(r)
		}
		w.Lit("]")
	}
	w.RawMap(`,"steps":`, cp.Steps, true)
	w.RawMap(`,"locals":`, cp.Locals, true)
	w.StrOmit(`,"gatePassed":`, cp.GatePassed)
	if len(cp.Decisions) > 0 {
		w.Value(`,"decisions":`, cp.Decisions)
	}
	if cp.Rejection != nil {
		w.Value(`,"rejection":`, cp.Rejection)
	}
	if e := cp.Expired; e != nil {
		w.Str(`,"expired":{"requestId":`, e.RequestID)
		w.Str(`,"node":`, e.Node)
		w.Str(`,"kind":`, e.Kind)
		w.Time(`,"expiresAt":`, e.ExpiresAt)
		w.StrOmit(`,"approverRole":`, e.ApproverRole)
		w.Lit("}")
	}
	if a := cp.Audit; a != nil {
		w.Uint(`,"audit":{"records":`, a.Records)
		w.Str(`,"hash":`, a.Hash)
		w.Lit("}")
	}
	if c := cp.Cause; c != nil {
		w.Str(`,"cause":{"id":`, c.ID)
		w.Str(`,"key":`, c.Key)
		w.UintOmit(`,"seq":`, c.Seq)
		w.BoolOmit(`,"due":`, c.Due)
		w.Lit("}")
	}
	w.StrsOmit(`,"applied":`, cp.Applied)
	w.Str(`,"uid":`, cp.UID)
	w.Uint(`,"seq":`, cp.Seq)
	if len(cp.Outbox) > 0 {
		w.Lit(`,"outbox":`)
		for i := range cp.Outbox {
			w.Sep(i, '[')
			cp.Outbox[i].appendJSON(&w)
		}
		w.Lit("]")
	}
	w.BoolOmit(`,"waited":`, cp.Waited)
	w.Lit("}")
	return w.B, w.Err
}

// appendJSON writes the message as json.Marshal does.
func (m *Message) appendJSON(w *jsonw.Writer) {
	w.Str(`{"stream":`, string(m.Stream))
	w.Str(`,"kind":`, m.Kind)
	w.Str(`,"id":`, m.ID)
	w.Str(`,"flow":`, m.Flow)
	w.Str(`,"run":`, m.Run)
	w.Time(`,"time":`, m.Time)
	w.Lit(`,"data":`)
	if a, ok := m.Data.(jsonAppender); ok {
		w.B, w.Err = appendData(w.B, w.Err, a)
	} else {
		w.Value("", m.Data)
	}
	w.StrOmit(`,"traceparent":`, m.Traceparent)
	w.Lit("}")
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
func (in *Interrupt) appendJSON(w *jsonw.Writer) {
	w.Str(`{"requestId":`, in.RequestID)
	w.Str(`,"node":`, in.Node)
	w.Int(`,"index":`, int64(in.Index))
	w.Str(`,"kind":`, in.Kind)
	protocol.WriteQuestions(w, wireQuestions(in.Questions))
	w.StrsOmit(`,"fields":`, in.Fields)
	w.StrOmit(`,"context":`, in.Context)
	w.RawMap(`,"answers":`, in.Answers, true)
	w.StrOmit(`,"question":`, in.Question)
	protocol.WriteOptions(w, in.Options)
	w.BoolOmit(`,"multiple":`, in.Multiple)
	w.StrsOmit(`,"selected":`, in.Selected)
	w.StrOmit(`,"action":`, in.Action)
	w.RawOmit(`,"args":`, in.Args)
	w.StrOmit(`,"reason":`, in.Reason)
	w.StrOmit(`,"approverRole":`, in.ApproverRole)
	protocol.WriteVerdicts(w, in.Decisions)
	w.BoolOmit(`,"rejectReasonRequired":`, in.RejectReasonRequired)
	w.StrsOmit(`,"assignees":`, in.Assignees)
	w.StrOmit(`,"claimedBy":`, in.ClaimedBy)
	w.StrOmit(`,"requester":`, in.Requester)
	if in.Quorum != nil {
		w.Value(`,"quorum":`, in.Quorum)
	}
	w.BoolOmit(`,"separationOfDuties":`, in.SeparationOfDuties)
	if len(in.Votes) > 0 {
		w.Value(`,"votes":`, in.Votes)
	}
	w.StrsOmit(`,"superseded":`, in.Superseded)
	if in.Remind != nil {
		w.Value(`,"remind":`, in.Remind)
	}
	if in.RemindedAt != nil {
		w.Time(`,"remindedAt":`, *in.RemindedAt)
	}
	w.StrOmit(`,"gate":`, in.Gate)
	if in.Decision != nil {
		w.Value(`,"decision":`, in.Decision)
	}
	w.StrOmit(`,"error":`, in.Error)
	w.StrOmit(`,"title":`, in.Title)
	w.StrOmit(`,"description":`, in.Description)
	w.RawOmit(`,"argsSchema":`, in.ArgsSchema)
	w.Time(`,"askedAt":`, in.AskedAt)
	if in.ExpiresAt != nil {
		w.Time(`,"expiresAt":`, *in.ExpiresAt)
	}
	if in.OnTimeout != nil {
		w.Value(`,"onTimeout":`, in.OnTimeout)
	}
	if in.Escalations != 0 {
		w.Int(`,"escalations":`, int64(in.Escalations))
	}
	w.StrsOmit(`,"retired":`, in.Retired)
	w.Lit("}")
}

// wireQuestions are questions as the wire has them, without validators.
func wireQuestions(qs []Question) []protocol.Question {
	if len(qs) == 0 {
		return nil
	}
	out := make([]protocol.Question, len(qs))
	for i, q := range qs {
		out[i] = protocol.Question{Field: q.Field, Question: q.Question, Type: q.Type, Suggestions: q.Suggestions, Context: q.Context, Schema: q.Schema}
	}
	return out
}
