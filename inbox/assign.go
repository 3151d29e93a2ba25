package inbox

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// assign answers POST /runs/{flow}/{run}/assign: a claim, a release or a
// delegation of the approval the page showed, sent on the caller's
// behalf. Interlock decides whether the caller may; a refusal is shown
// on the run's page with Interlock's reason.
func (in *Inbox) assign(w http.ResponseWriter, r *http.Request, s session) {
	f, ok := in.pendingForm(w, r, s)
	if !ok {
		return
	}
	flow, run, requestID, cl, cp := f.flow, f.run, f.requestID, f.cl, f.cp
	a := protocol.Assign{RequestID: requestID, Op: r.PostFormValue("op"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	iv := &interruptView{CheckpointInterrupt: *cp.Interrupt, StartedBy: cp.StartedBy, Errors: map[string]string{}, Values: map[string]string{}}
	switch a.Op {
	case protocol.AssignClaim, protocol.AssignRelease:
	case protocol.AssignDelegate:
		to := strings.TrimSpace(r.PostFormValue("to"))
		iv.Values["to"], iv.Values["toKind"], iv.Values["reason.delegate"] = to, r.PostFormValue("toKind"), a.Reason
		switch {
		case to == "":
			iv.Errors["to"] = "Name the person, or the role, to hand this approval to."
		case r.PostFormValue("toKind") == "role" && !strings.HasPrefix(to, protocol.RolePrefix):
			to = protocol.RolePrefix + to
		}
		a.To = to
	default:
		iv.Errors[""] = "Choose claim, release or delegate."
	}
	if len(iv.Errors) > 0 {
		in.showRun(w, r, s, flow, run, http.StatusUnprocessableEntity, runView{In: iv})
		return
	}
	ev, err := cl.Assign(r.Context(), flow, run, a)
	if err == nil && ev.Kind == protocol.EventRefused {
		var ref protocol.Refused
		if derr := ev.Decode(&ref); derr != nil {
			err = derr
		} else {
			err = &client.RefusedError{Refused: ref, What: a.Op + " of " + flow + " " + run}
		}
	}
	var rerr *client.RefusedError
	switch {
	case err == nil:
		http.Redirect(w, r, fmt.Sprintf("/runs/%s/%s?sent=%s", flow, run, a.Op), http.StatusSeeOther)
	case errors.Is(err, client.ErrNoAnswer):
		http.Redirect(w, r, fmt.Sprintf("/runs/%s/%s?sent=queued", flow, run), http.StatusSeeOther)
	case errors.As(err, &rerr):
		ref := rerr.Refused
		switch ref.Code {
		case protocol.CodeTokenMismatch, protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeStaleCheckpoint:
			in.conflict(w, r, s, cl, flow, run, requestID)
		case protocol.CodeForbidden:
			in.showRun(w, r, s, flow, run, http.StatusForbidden, runView{Conflict: authority.Tell(ref)})
		case protocol.CodeInvalidPayload:
			if a.Op == protocol.AssignDelegate {
				iv.Errors["to"] = ref.Message
				in.showRun(w, r, s, flow, run, http.StatusUnprocessableEntity, runView{In: iv})
				return
			}
			in.showRun(w, r, s, flow, run, http.StatusBadRequest, runView{Conflict: authority.Tell(ref)})
		default:
			in.showRun(w, r, s, flow, run, ref.Code.HTTPStatus(), runView{Conflict: authority.Tell(ref)})
		}
	default:
		in.fail(w, r, s, err)
	}
}
