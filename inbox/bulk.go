package inbox

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// maxBulk bounds the requests one bulk decision takes.
const maxBulk = 50

// bulkView is the data of a bulk decision's outcome.
type bulkView struct {
	// Decision is approve or reject; Verb says it done ("Approved").
	Decision, Verb string
	Applied        []bulkOutcome
	LeftOut        []bulkOutcome
}

// bulkOutcome is what became of one request of a bulk decision.
type bulkOutcome struct {
	Flow, Run, Title string
	// Why says why it was left out.
	Why string
}

// bulkItem is a request as the queue showed it: which, and the version
// of its checkpoint the caller saw.
type bulkItem struct {
	flow, run, requestID string
	version              uint64
}

// bulkValue is the value of a queue row's checkbox: the request and the
// version shown, which the decision is bound to.
func bulkValue(p protocol.Pending) string {
	return strings.Join([]string{p.Flow, p.Run, p.RequestID, strconv.FormatUint(p.Checkpoint, 10)}, " ")
}

// parseBulkItem reads a checkbox's value.
func parseBulkItem(v string) (bulkItem, error) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return bulkItem{}, errors.New("not a request of the queue")
	}
	ver, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		return bulkItem{}, errors.New("not a request of the queue")
	}
	for _, n := range [][2]string{{"flow", f[0]}, {"run", f[1]}} {
		if err := protocol.CheckName(n[0], n[1]); err != nil {
			return bulkItem{}, err
		}
	}
	return bulkItem{flow: f[0], run: f[1], requestID: f[2], version: ver}, nil
}

// bulkEligible reports whether the queue offers p to s for a bulk
// decision: an approval s may decide alone, now, with a plain approve or
// reject (its page takes what needs more: an edit, a reason, another
// approver's vote).
func (in *Inbox) bulkEligible(s session, p protocol.Pending) bool {
	if !protocol.RoleRestricted(p.Kind) || (p.ClaimedBy != "" && p.ClaimedBy != s.Name) || slices.Contains(p.Voters, s.Name) {
		return false
	}
	if p.Quorum != nil && p.Quorum.Total()-len(p.Voters) > 1 {
		return false
	}
	return in.mayDecide(s, authority.EntryOf(p))
}

// bulk answers POST /bulk: one decision, approve or reject, of each
// request selected in the queue, sent as a decision of its own under the
// caller's identity and bound to the version of the request shown. A
// request that changed or was settled meanwhile, or that needs more than
// a plain decision, is left out and said so.
func (in *Inbox) bulk(w http.ResponseWriter, r *http.Request, s session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		in.errorPage(w, r, s, http.StatusBadRequest, "The form did not arrive whole", "Send it again.")
		return
	}
	if !in.checkCSRF(r, s) {
		in.errorPage(w, r, s, http.StatusForbidden, "The form has expired", "Load the queue again and send the form from there.")
		return
	}
	v := bulkView{Decision: r.PostFormValue("decision")}
	switch protocol.Verdict(v.Decision) {
	case protocol.VerdictApprove:
		v.Verb = "Approved"
	case protocol.VerdictReject:
		v.Verb = "Rejected"
	default:
		in.errorPage(w, r, s, http.StatusBadRequest, "No such decision", "Choose Approve selected or Reject selected.")
		return
	}
	values := r.PostForm["item"]
	switch {
	case len(values) == 0:
		in.errorPage(w, r, s, http.StatusBadRequest, "Nothing selected", "Select the requests to decide in the queue first.")
		return
	case len(values) > maxBulk:
		in.errorPage(w, r, s, http.StatusBadRequest, "Too many at once", fmt.Sprintf("Decide at most %d requests at once; select fewer.", maxBulk))
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	key := r.PostFormValue("key")
	if !validKey(key) {
		key = randomKey()
	}
	cl := in.client(s)
	seen := map[string]bool{}
	for _, value := range values {
		it, err := parseBulkItem(value)
		if err != nil {
			v.LeftOut = append(v.LeftOut, bulkOutcome{Title: "A selection", Why: "It is not a request of the queue (" + err.Error() + "): select it in the queue again."})
			continue
		}
		if seen[it.flow+"."+it.run] {
			continue
		}
		seen[it.flow+"."+it.run] = true
		o, applied := in.bulkOne(r, cl, it, protocol.Verdict(v.Decision), reason, key)
		if applied {
			v.Applied = append(v.Applied, o)
		} else {
			v.LeftOut = append(v.LeftOut, o)
		}
	}
	in.render(w, http.StatusOK, "bulk", page{Title: v.Verb, Nav: "queue", Session: &s, CSRF: in.csrf(s), Body: v})
}

// bulkOne sends one request's decision, if it is still the one shown and
// takes a plain decision, and says what became of it.
func (in *Inbox) bulkOne(r *http.Request, cl *client.Client, it bulkItem, decision protocol.Verdict, reason, key string) (bulkOutcome, bool) {
	o := bulkOutcome{Flow: it.flow, Run: it.run, Title: it.flow + " " + it.run}
	cp, err := cl.Checkpoint(r.Context(), it.flow, it.run)
	switch {
	case errors.Is(err, client.ErrNotFound):
		o.Why = "There is no such run any more."
		return o, false
	case err != nil:
		in.log.Error().Err(err).Msg("inbox: reading a run of a bulk decision")
		o.Why = "Interlock could not be reached; nothing was sent for it."
		return o, false
	}
	if cp.Interrupt != nil {
		o.Title = cmp.Or(cp.Interrupt.Title, cp.Interrupt.Action, o.Title)
	}
	in2 := cp.Interrupt
	switch {
	case !cp.Waiting() || in2.RequestID != it.requestID:
		o.Why = in.settledWhy(r, cl, it.flow, it.run, it.requestID)
		return o, false
	case cp.Checkpoint != it.version:
		o.Why = "It changed since the queue showed it (claimed, delegated, voted on or reminded): open it and decide it there."
		return o, false
	case len(in2.Decisions) > 0 && !slices.Contains(in2.Decisions, decision):
		o.Why = fmt.Sprintf("It does not take a plain %s (it allows %s): open it and decide it there.", decision, verdicts(in2.Decisions))
		return o, false
	case decision == protocol.VerdictReject && in2.RejectReasonRequired && reason == "":
		o.Why = "Rejecting it needs a reason: give one with the selection, or reject it on its page."
		return o, false
	case in2.Quorum != nil && in2.Quorum.Total()-voters(in2.Votes) > 1:
		o.Why = "It needs more approvers than you: vote on its page."
		return o, false
	}
	version := it.version
	h := sha256.Sum256([]byte(key + " " + it.flow + " " + it.run + " " + it.requestID))
	res := protocol.Resume{RequestID: it.requestID, Decision: string(decision), Reason: reason, ExpectedCheckpoint: &version,
		IdempotencyKey: "inbox-" + hex.EncodeToString(h[:12])}
	ev, err := cl.Resume(r.Context(), it.flow, it.run, res)
	var ref protocol.Refused
	var rerr *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		o.Why = "Sent, but Interlock has not taken it yet: open it to see."
		return o, false
	case errors.As(err, &rerr):
		ref = rerr.Refused
	case err != nil:
		in.log.Error().Err(err).Msg("inbox: a decision of a bulk decision")
		o.Why = "Interlock could not be reached; open it to see whether it was decided."
		return o, false
	case ev.Kind == protocol.EventRefused:
		_ = ev.Decode(&ref)
	default:
		return o, true
	}
	switch ref.Code {
	case protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeTokenMismatch:
		o.Why = in.settledWhy(r, cl, it.flow, it.run, it.requestID)
	case protocol.CodeStaleCheckpoint:
		o.Why = "It changed since the queue showed it: open it and decide it there."
	default:
		o.Why = authority.Tell(ref)
	}
	return o, false
}

// settledWhy says who settled request requestID of a run, and how, as
// its audit says.
func (in *Inbox) settledWhy(r *http.Request, cl *client.Client, flow, run, requestID string) string {
	if recs, err := cl.VouchedAudit(r.Context(), flow, run); err == nil {
		for _, rec := range slices.Backward(recs) {
			if rec.RequestID != requestID || !slices.Contains(settled, rec.Action) {
				continue
			}
			by := rec.By
			if by == "" {
				by = "Interlock"
			}
			return fmt.Sprintf("Already %s by %s: nothing was sent for it.", rec.Action, by)
		}
	}
	return "It no longer waits: nothing was sent for it."
}

// voters counts the distinct approvers of votes.
func voters(votes []protocol.Vote) int {
	var who []string
	for _, v := range votes {
		if !slices.Contains(who, v.Approver) {
			who = append(who, v.Approver)
		}
	}
	return len(who)
}

// verdicts says a list of decisions in words.
func verdicts(vs []protocol.Verdict) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return strings.Join(out, ", ")
}
