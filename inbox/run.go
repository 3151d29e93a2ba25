package inbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// maxHistory bounds the events a run's page lists.
const maxHistory = 200

// runView is the data of a run's page.
type runView struct {
	Flow, Run string
	CP        protocol.Checkpoint
	// In is the pending interrupt, when the run waits.
	In *interruptView
	// Notice says what the last form did; Conflict what someone else
	// did meanwhile.
	Notice, Conflict string
	Events           []eventView
	Audit            []protocol.AuditRecord
	MoreEvents       bool
	Partial, Stream  string
	// Conversation is what led a gate run's agent to ask.
	Conversation *conversationView
}

// conversationView is a gate run's conversation, as the page shows it.
type conversationView struct {
	protocol.Conversation
	// Messages are its messages, long ones folded.
	Messages []messageView
	// ContextFields are the context the agent sent, as fields.
	ContextFields []fieldView
}

// messageView is one message of a conversation.
type messageView struct {
	protocol.Message
	// Fold is set for a long message, shown folded after Lead.
	Fold bool
	Lead string
	// Fields are a message whose text is a JSON object (a tool's
	// result), shown as fields rather than as raw JSON.
	Fields []fieldView
}

// fieldView is one field of a JSON object shown to a person: its key,
// and its value as text (a string as it is, anything else as compact
// JSON, JSON set).
type fieldView struct {
	Key, Text string
	JSON      bool
}

// maxFields bounds the fields a JSON object is shown as; a larger one
// is shown as its text.
const maxFields = 40

// fieldsOf are the fields of raw when it is a JSON object of at most
// maxFields keys, in its order; nil otherwise.
func fieldsOf(raw []byte) []fieldView {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []fieldView
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok || len(out) == maxFields {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		f := fieldView{Key: key}
		var str string
		if json.Unmarshal(v, &str) == nil {
			f.Text = str
		} else {
			var b bytes.Buffer
			if json.Compact(&b, v) != nil {
				return nil
			}
			f.Text, f.JSON = b.String(), protocol.JSONTypeOf(v) != protocol.JSONNumber && protocol.JSONTypeOf(v) != protocol.JSONBoolean
		}
		out = append(out, f)
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return nil
	}
	return out
}

// foldAt is the length past which a message is folded.
const foldAt = 360

// interruptView is the pending interrupt and its forms.
type interruptView struct {
	protocol.CheckpointInterrupt
	// StartedBy is who started the run, who may not vote on its quorum
	// with separation of duties.
	StartedBy string
	// Allowed are the decisions an approval allows.
	Allowed []protocol.Verdict
	// May are the decisions of Allowed the caller may send, as the
	// authority says: a vote is refused to whoever voted already, and
	// to whoever asked under separation of duties. VoteRefused says why
	// the authority refuses one of Allowed to a caller who may decide.
	May         []protocol.Verdict
	VoteRefused string
	// ArgsJSON is the proposal's args, indented, or the edit sent back.
	ArgsJSON string
	// MayDecide is set when the caller may answer: an approval only
	// someone holding its role.
	MayDecide bool
	// Errors are the forms' errors, by field: answer.<field>, selected,
	// args, reason, or "" for the form as a whole.
	Errors map[string]string
	// Values are the values sent back with errors.
	Values map[string]string
	// Key is the idempotency key of the forms: sending one twice decides
	// once.
	Key      string
	Left     string
	Overdue  bool
	Proposal map[string]json.RawMessage
	// Heading says what an approval proposes: its title, else its
	// action. Fields are its arguments, shown and edited by their
	// schema.
	Heading string
	Fields  []argField
	// Consequence says what happens at the deadline.
	Consequence string
	// MayClaim is set when the caller may claim the approval; Mine when
	// they have claimed it.
	MayClaim, Mine bool
	// Tally is set for an approval that takes several approvers.
	Tally *quorumView
	// Proposes is set for a kind whose card shows what it proposes
	// beside its decision (its propose-<kind> part).
	Proposes bool
	// ShowReason is set when the reason says something the description
	// does not: each is shown once.
	ShowReason bool
	// Roles are the roles that decide it (its approver role and its
	// quorum's); YourRole the one of them the viewer decides in, when
	// the viewer holds one.
	Roles    []string
	YourRole string
	// Reminded is when the latest reminder fell due.
	Reminded *time.Time
}

// deciders sets the roles that decide iv (its approver role and its
// quorum's), and the one of them s decides in when s may decide.
func (iv *interruptView) deciders(s session) {
	iv.Roles = protocol.DeciderRoles(iv.ApproverRole, iv.Quorum)
	iv.YourRole = ""
	if !iv.MayDecide {
		return
	}
	for _, r := range iv.Roles {
		if s.holds(r) {
			iv.YourRole = r
			return
		}
	}
}

// argField is an argument of an approval, with its form's field.
type argField struct {
	protocol.Arg
	// ID and Name are the form field's; Control is the field's HTML
	// kind: number, select, checkbox, email, url, datetime, textarea,
	// json or text.
	ID, Name, Control string
	// Input is the field's text: the proposal's, or what was sent back.
	Input string
	// Checked is a checkbox's state.
	Checked bool
	// Min, Max and Step are a number field's attributes.
	Min, Max, Step string
	// Error is the edit's error of this argument.
	Error string
}

// quorumView is where a quorum stands.
type quorumView struct {
	Required int
	Votes    []protocol.Vote
	// Voters counts the distinct approvers so far.
	Voters int
	// Still says who may still vote.
	Still string
	// Voted is set when the caller has voted.
	Voted bool
}

// eventView is one event of a run's history.
type eventView struct {
	Seq  uint64
	Kind string
	Time time.Time
	// Summary says what happened in a line.
	Summary string
	// Diff compares an edit with the proposal.
	Diff []diffRow
}

// diffRow is one argument of an edited approval.
type diffRow struct {
	Key, Proposed, Edited string
	Changed               bool
}

// runPage answers GET /runs/{flow}/{run}: the run's pending interrupt
// with its forms, and its history.
func (in *Inbox) runPage(w http.ResponseWriter, r *http.Request, s session) {
	flow, run, ok := in.names(w, r, s)
	if !ok {
		return
	}
	v := runView{}
	switch r.URL.Query().Get("sent") {
	case "answer":
		v.Notice = "Your answer was sent."
	case "decision":
		v.Notice = "Your decision was sent."
	case "claim":
		v.Notice = "You claimed it: only you may decide it now, until you release it."
	case "release":
		v.Notice = "You released it: anyone who may decide it can claim it."
	case "delegate":
		v.Notice = "You handed it on."
	case "queued":
		v.Notice = "Sent. Interlock has not taken it yet; this page shows it once it has."
	}
	in.showRun(w, r, s, flow, run, http.StatusOK, v)
}

// showRun renders a run's page with v's notices, errors and values.
func (in *Inbox) showRun(w http.ResponseWriter, r *http.Request, s session, flow, run string, status int, v runView) {
	cl := in.client(s)
	cp, err := cl.Checkpoint(r.Context(), flow, run)
	if err != nil {
		in.fail(w, r, s, err)
		return
	}
	var ref *authority.Refusal
	if err := in.port.Authority().MayRead(s.Caller, authority.RunOf(cp)); errors.As(err, &ref) {
		in.errorPage(w, r, s, http.StatusForbidden, "Not yours to read", flow+" "+run+" is kept for whoever asked for it and the people who may answer it, and you are neither.")
		return
	}
	v.Flow, v.Run, v.CP = flow, run, cp
	if err := in.history(r, cl, &v); err != nil {
		in.fail(w, r, s, err)
		return
	}
	if cp.Waiting() {
		iv := v.In
		if iv == nil {
			iv = &interruptView{}
		}
		iv.CheckpointInterrupt, iv.StartedBy = *cp.Interrupt, cp.StartedBy
		ci := cp.Interrupt
		iv.MayDecide = in.mayDecide(s, authority.RunOf(cp))
		iv.Mine = ci.ClaimedBy != "" && ci.ClaimedBy == s.Name
		iv.MayClaim = protocol.RoleRestricted(ci.Kind) && ci.ClaimedBy == "" && iv.MayDecide
		iv.Key = randomKey()
		if ci.ExpiresAt != nil {
			left := time.Until(*ci.ExpiresAt)
			iv.Left, iv.Overdue = duration(left), left <= 0
			iv.Consequence = ci.OnTimeout.Consequence()
		}
		iv.Reminded = ci.RemindedAt
		iv.deciders(s)
		viewOf(iv.Kind).prepare(iv)
		in.decisions(s, authority.RunOf(cp), iv)
		if iv.Tally != nil {
			iv.Tally.Voted = slices.ContainsFunc(ci.Votes, func(v protocol.Vote) bool { return v.Approver == s.Name })
		}
		v.In = iv
	} else {
		v.In = nil
	}
	v.Conversation = conversationOf(cp)
	v.Partial = fmt.Sprintf("/runs/%s/%s?partial=1", flow, run)
	v.Stream = fmt.Sprintf("/stream?flow=%s&run=%s", flow, run)
	if r.Method == http.MethodGet && r.URL.Query().Get("partial") != "" {
		in.renderTemplate(w, status, "run", "history", v)
		return
	}
	in.render(w, status, "run", page{Title: flow + " " + run, Session: &s, CSRF: in.csrf(s), Body: v})
}

// conversationOf is what led a gate or ask run's agent to ask, long
// messages folded; nil for other runs.
func conversationOf(cp protocol.Checkpoint) *conversationView {
	c, ok := cp.Conversation()
	if !ok {
		return nil
	}
	cv := &conversationView{Conversation: c, ContextFields: fieldsOf(c.Context)}
	for _, m := range c.Messages {
		mv := messageView{Message: m, Fields: fieldsOf([]byte(strings.TrimSpace(m.Text)))}
		if len(m.Text) > foldAt {
			mv.Fold, mv.Lead = true, protocol.Truncate(m.Text, 120)
		}
		cv.Messages = append(cv.Messages, mv)
	}
	return cv
}

// history reads a run's events and audit records.
func (in *Inbox) history(r *http.Request, cl *client.Client, v *runView) error {
	evs, more, err := cl.RunEvents(r.Context(), v.Flow, v.Run, maxHistory)
	if err != nil {
		return err
	}
	v.MoreEvents = more
	proposals := map[string]json.RawMessage{}
	for _, ev := range evs {
		e := eventView{Seq: ev.Seq, Kind: ev.Kind, Time: ev.Event.Time()}
		switch ev.Kind {
		case protocol.EventInterrupted:
			var d protocol.Interrupted
			_ = json.Unmarshal(ev.Event.Data(), &d)
			proposals[d.RequestID] = d.Args
			e.Summary = viewOf(d.Kind).summary(d)
			if d.Error != "" {
				e.Summary += " (again: " + d.Error + ")"
			}
		case protocol.EventResumed:
			var d protocol.Resumed
			_ = json.Unmarshal(ev.Event.Data(), &d)
			who := d.Approver
			if who == "" {
				who = strings.TrimPrefix(strings.TrimPrefix(ev.Event.Source(), "/inbox/"), "/http/")
			}
			if d.Decision != "" {
				e.Summary = fmt.Sprintf("%s: %s by %s", d.Node, d.Decision, who)
			} else {
				e.Summary = fmt.Sprintf("%s answered by %s", d.Node, who)
			}
			if d.Reason != "" {
				e.Summary += ": " + d.Reason
			}
			if len(d.Edits) > 0 {
				e.Diff = diff(proposals[d.RequestID], d.Edits)
			}
		case protocol.EventVoted:
			var d protocol.Voted
			_ = json.Unmarshal(ev.Event.Data(), &d)
			e.Summary = fmt.Sprintf("%s voted to approve (%d of %d)", d.Approver, len(d.Votes), d.Required)
		case protocol.EventAssigned:
			var d protocol.Assigned
			_ = json.Unmarshal(ev.Event.Data(), &d)
			switch d.Op {
			case protocol.AssignClaim:
				e.Summary = "claimed by " + d.By
			case protocol.AssignRelease:
				e.Summary = "released by " + d.By
			default:
				to := d.ApproverRole
				if len(d.Assignees) > 0 {
					to = strings.Join(d.Assignees, ", ")
				}
				e.Summary = fmt.Sprintf("delegated by %s to %s", d.By, to)
			}
			if d.Reason != "" {
				e.Summary += ": " + d.Reason
			}
		case protocol.EventReminded:
			e.Summary = "reminded the people who may decide"
		case protocol.EventCompleted:
			e.Summary = "completed"
		default:
			e.Summary = ev.Kind
		}
		v.Events = append(v.Events, e)
	}
	// Only what the verifier vouches for is shown as the run's history.
	recs, err := cl.VouchedAudit(r.Context(), v.Flow, v.Run)
	if err != nil {
		return err
	}
	v.Audit = recs
	return nil
}

// diff compares an approval's edits with its proposal, argument by
// argument.
func diff(proposal, edits json.RawMessage) []diffRow {
	var p, e map[string]json.RawMessage
	_ = json.Unmarshal(proposal, &p)
	_ = json.Unmarshal(edits, &e)
	keys := map[string]bool{}
	for k := range p {
		keys[k] = true
	}
	for k := range e {
		keys[k] = true
	}
	var rows []diffRow
	for _, k := range sortedKeys(keys, "") {
		row := diffRow{Key: k, Proposed: compact(p[k]), Edited: compact(p[k])}
		if ev, ok := e[k]; ok {
			row.Edited = compact(ev)
			row.Changed = row.Edited != row.Proposed
		}
		rows = append(rows, row)
	}
	return rows
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func indent(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "inbox-" + hex.EncodeToString(b)
}

// names reads the flow and run of the path.
func (in *Inbox) names(w http.ResponseWriter, r *http.Request, s session) (flow, run string, ok bool) {
	flow, run = r.PathValue("flow"), r.PathValue("run")
	for _, n := range [][2]string{{"flow", flow}, {"run", run}} {
		if err := protocol.CheckName(n[0], n[1]); err != nil {
			in.errorPage(w, r, s, http.StatusBadRequest, "No such run", strings.TrimPrefix(err.Error(), "client: "))
			return "", "", false
		}
	}
	return flow, run, true
}

// fail shows an error of the client.
func (in *Inbox) fail(w http.ResponseWriter, r *http.Request, s session, err error) {
	if errors.Is(err, client.ErrNotFound) {
		in.errorPage(w, r, s, http.StatusNotFound, "No such run", "There is no such run: it may have finished long ago, or the address is wrong.")
		return
	}
	in.log.Error().Err(err).Msg("inbox: request failed")
	in.errorPage(w, r, s, http.StatusServiceUnavailable, "Interlock is unavailable", "The inbox could not reach Interlock. Try again in a moment.")
}

// resume answers POST /runs/{flow}/{run}: a form's answer, choice or
// decision, sent on the caller's behalf for the request the page showed.
// A validation error is shown beside its field; a request someone else
// settled meanwhile is shown with who did what.
func (in *Inbox) resume(w http.ResponseWriter, r *http.Request, s session) {
	f, ok := in.pendingForm(w, r, s)
	if !ok {
		return
	}
	flow, run, requestID, cl, cp := f.flow, f.run, f.requestID, f.cl, f.cp
	iv := &interruptView{CheckpointInterrupt: *cp.Interrupt, StartedBy: cp.StartedBy, Errors: map[string]string{}, Values: map[string]string{}}
	res := protocol.Resume{RequestID: requestID, IdempotencyKey: r.PostFormValue("key")}
	if !validKey(res.IdempotencyKey) {
		res.IdempotencyKey = ""
	}
	kv := viewOf(cp.Interrupt.Kind)
	sent := kv.read(r, iv, &res)
	if spec, ok := protocol.SpecOf(iv.Kind); ok && len(iv.Errors) == 0 {
		// The kind's own rule, as Interlock applies it, before sending.
		if err := spec.Check(iv.Asked(), res.Answer()); err != nil {
			iv.Errors[kv.field(res)] = err.Error()
		}
	}
	if len(iv.Errors) > 0 {
		in.showRun(w, r, s, flow, run, http.StatusUnprocessableEntity, runView{In: iv})
		return
	}
	ev, err := cl.Resume(r.Context(), flow, run, res)
	var ref protocol.Refused
	var rerr *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		http.Redirect(w, r, fmt.Sprintf("/runs/%s/%s?sent=queued", flow, run), http.StatusSeeOther)
		return
	case errors.As(err, &rerr):
		ref = rerr.Refused
	case err != nil:
		in.fail(w, r, s, err)
		return
	case ev.Kind == protocol.EventRefused:
		if err := ev.Decode(&ref); err != nil {
			in.fail(w, r, s, fmt.Errorf("decoding the refusal: %w", err))
			return
		}
	default:
		http.Redirect(w, r, fmt.Sprintf("/runs/%s/%s?sent=%s", flow, run, sent), http.StatusSeeOther)
		return
	}
	switch ref.Code {
	case protocol.CodeInvalidAnswer:
		iv.Errors[kv.field(res)] = ref.Message
		in.showRun(w, r, s, flow, run, http.StatusUnprocessableEntity, runView{In: iv})
	case protocol.CodeTokenMismatch, protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeStaleCheckpoint:
		in.conflict(w, r, s, cl, flow, run, requestID)
	case protocol.CodeForbidden:
		in.showRun(w, r, s, flow, run, http.StatusForbidden, runView{Conflict: authority.Tell(ref)})
	default:
		in.showRun(w, r, s, flow, run, ref.Code.HTTPStatus(), runView{Conflict: authority.Tell(ref)})
	}
}

// validKey reports whether a form's idempotency key is one the page made.
func validKey(k string) bool {
	if len(k) != len("inbox-")+24 || !strings.HasPrefix(k, "inbox-") {
		return false
	}
	_, err := hex.DecodeString(k[len("inbox-"):])
	return err == nil
}

// settled are the audit actions that settle a request.
var settled = []string{
	protocol.ActionAnswered, protocol.ActionApproved, protocol.ActionEdited, protocol.ActionRejected,
	protocol.ActionResponded, protocol.ActionVoted,
	protocol.ActionExpired, protocol.ActionEscalated, protocol.ActionCancelled, protocol.ActionReannounced,
}

// conflict shows a run whose request someone or something else settled
// before the caller's form arrived: who, what, and why.
func (in *Inbox) conflict(w http.ResponseWriter, r *http.Request, s session, cl *client.Client, flow, run, requestID string) {
	msg := "This request was settled before your form arrived; nothing you sent was applied."
	if recs, err := cl.VouchedAudit(r.Context(), flow, run); err == nil {
		for _, rec := range slices.Backward(recs) {
			if rec.RequestID != requestID || !slices.Contains(settled, rec.Action) {
				continue
			}
			by := rec.By
			if by == "" {
				by = "Interlock"
			}
			msg = fmt.Sprintf("Already %s by %s at %s", rec.Action, by, rec.At.UTC().Format("15:04:05 UTC"))
			if rec.Reason != "" {
				msg += ": “" + rec.Reason + "”"
			}
			msg += ". Your form was not applied."
			break
		}
	}
	in.showRun(w, r, s, flow, run, http.StatusConflict, runView{Conflict: msg})
}

// form is a posted form for the request a run's page showed, still the
// one pending.
type form struct {
	flow, run, requestID string
	cl                   *client.Client
	cp                   protocol.Checkpoint
}

// pendingForm reads a form posted to a run's page: its names, its body
// (bounded), its CSRF token, and the run, which must still wait on the
// request the page showed. Otherwise it answers, and ok is false: a bad
// form or token with an error page, a request settled meanwhile with who
// settled it.
func (in *Inbox) pendingForm(w http.ResponseWriter, r *http.Request, s session) (f form, ok bool) {
	f.flow, f.run, ok = in.names(w, r, s)
	if !ok {
		return f, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		in.errorPage(w, r, s, http.StatusBadRequest, "The form did not arrive whole", "Send it again.")
		return f, false
	}
	if !in.checkCSRF(r, s) {
		in.errorPage(w, r, s, http.StatusForbidden, "The form has expired", "Load the page again and send the form from there.")
		return f, false
	}
	f.requestID = r.PostFormValue("requestId")
	f.cl = in.client(s)
	cp, err := f.cl.Checkpoint(r.Context(), f.flow, f.run)
	if err != nil {
		in.fail(w, r, s, err)
		return f, false
	}
	if !cp.Waiting() || cp.Interrupt.RequestID != f.requestID {
		in.conflict(w, r, s, f.cl, f.flow, f.run, f.requestID)
		return f, false
	}
	f.cp = cp
	return f, true
}
