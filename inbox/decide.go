package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
)

// decideView is the data of a decision link's page: the proposal and
// the forms, for the person the link was sent to.
type decideView struct {
	runView
	// Person is who the link speaks for.
	Person string
	// Expires is when the link stops working.
	Expires time.Time
}

// decidedView is the data of a decision link's page that decides
// nothing (any more): what became of the link, or of the decision.
type decidedView struct {
	Heading, Detail string
	// State names the case: off, forged, expired, unknown_person, used,
	// settled, gone, bad_form, refused, queued, done or unavailable.
	State string
	// Inbox is set when the inbox is worth a look.
	Inbox bool
}

// linkTime is a time as a decision link's page says it.
func linkTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// decidedPage answers with a page that decides nothing.
func (in *Inbox) decidedPage(w http.ResponseWriter, status int, v decidedView) {
	in.render(w, status, "decided", page{Title: v.Heading, Body: v})
}

// link checks the decision link of the request's path, and the person
// it speaks for, with the roles they hold now. Otherwise it answers with
// a page that says which (forged, expired, a person no longer here), and
// ok is false. Every answer of a link's page is kept from caches,
// referrers and search engines.
func (in *Inbox) link(w http.ResponseWriter, r *http.Request) (c links.Claims, s session, ok bool) {
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Robots-Tag", "noindex, nofollow")
	if in.cfg.Links == nil || in.cfg.Uses == nil {
		in.decidedPage(w, http.StatusNotFound, decidedView{State: "off", Heading: "This Interlock takes no decision links",
			Detail: "It was started without them. Decide in the inbox instead.", Inbox: true})
		return c, s, false
	}
	text := r.PathValue("link")
	err := links.ErrForged
	if len(text) <= httpapi.MaxLink {
		c, err = in.cfg.Links.Check(text, links.KindDecide, time.Now())
	}
	switch {
	case errors.Is(err, links.ErrExpired):
		in.decidedPage(w, http.StatusGone, decidedView{State: "expired", Heading: "This link has expired",
			Detail: fmt.Sprintf("It worked until %s, when the request it was sent for expired. Nothing was decided through it.", linkTime(c.ExpiresAt())), Inbox: true})
		return c, s, false
	case err != nil:
		in.decidedPage(w, http.StatusNotFound, decidedView{State: "forged", Heading: "This link is not valid",
			Detail: "This Interlock did not make it, or it was changed on the way (a mail program may have cut it short). Open it from the mail again, copying the whole address, or decide in the inbox."})
		return c, s, false
	}
	p, ok := httpapi.Person(in.cfg.People, in.cfg.Auth, c.Person)
	if !ok {
		in.decidedPage(w, http.StatusForbidden, decidedView{State: "unknown_person", Heading: "This link no longer works",
			Detail: fmt.Sprintf("It was sent to %s, who is no longer among the people who decide here. Ask an administrator if that is a mistake.", c.Person)})
		return c, s, false
	}
	return c, session{Caller: p}, true
}

// pendingFor reports whether cp still waits on the request requestID: it
// is the pending one, or, with a quorum, one that a vote replaced and
// whose decision still counts.
func pendingFor(cp protocol.Checkpoint, requestID string) bool {
	if !cp.Waiting() {
		return false
	}
	in := cp.Interrupt
	return in.RequestID == requestID || in.Quorum != nil && slices.Contains(in.Superseded, requestID)
}

// decidePage answers GET (and HEAD) /decide/{link}: the proposal and a
// form for each decision the person may make. It never decides: mail
// scanners open links.
func (in *Inbox) decidePage(w http.ResponseWriter, r *http.Request) {
	c, s, ok := in.link(w, r)
	if !ok {
		return
	}
	if in.used(w, r, c, s) {
		return
	}
	cl := in.client(s)
	cp, ok := in.linkCheckpoint(w, r, s, cl, c)
	if !ok {
		return
	}
	in.showDecide(w, s, c, cp, http.StatusOK, nil)
}

// used answers for a link used already, and reports whether it did.
func (in *Inbox) used(w http.ResponseWriter, r *http.Request, c links.Claims, s session) bool {
	use, used, err := in.cfg.Uses.Used(r.Context(), c.ID)
	switch {
	case err != nil:
		in.linkFail(w, err)
		return true
	case !used:
		return false
	}
	detail := fmt.Sprintf("It was used at %s; a link decides once.", linkTime(use.At))
	// Who settled it, and how, only for a person who may still read the
	// run.
	cl := in.client(s)
	if cp, err := cl.Checkpoint(r.Context(), c.Flow, c.Run); err == nil && in.port.Authority().MayRead(s.Caller, authority.RunOf(cp)) == nil {
		if heading, what, ok := in.settled(r.Context(), cl, c); ok {
			detail += " " + heading + ": " + what
		}
	}
	in.decidedPage(w, http.StatusConflict, decidedView{State: "used", Heading: "This link was used", Detail: detail, Inbox: true})
	return true
}

// linkCheckpoint reads the link's run, which the link's person must
// still be let read, as the authority says (a link is its person's
// credential, never more: one mailed before they lost a role shows
// nothing once they have), and which must still wait on the link's
// request; otherwise it answers with what became of it.
func (in *Inbox) linkCheckpoint(w http.ResponseWriter, r *http.Request, s session, cl *client.Client, c links.Claims) (protocol.Checkpoint, bool) {
	cp, err := cl.Checkpoint(r.Context(), c.Flow, c.Run)
	var ref *authority.Refusal
	switch {
	case errors.Is(err, client.ErrNotFound):
		in.decidedPage(w, http.StatusNotFound, decidedView{State: "gone", Heading: "This request is gone",
			Detail: "Its run finished long ago and is no longer kept. Nothing waits for a decision."})
		return cp, false
	case err != nil:
		in.linkFail(w, err)
		return cp, false
	case errors.As(in.port.Authority().MayRead(s.Caller, authority.RunOf(cp)), &ref):
		in.decidedPage(w, http.StatusForbidden, decidedView{State: "refused", Heading: "Not yours to read",
			Detail: fmt.Sprintf("This link was sent to %s, who may not see this request now: it is kept for whoever asked for it and the people who may answer it. Nothing was decided through it.", c.Person)})
		return cp, false
	case !pendingFor(cp, c.RequestID):
		heading, detail, _ := in.settled(r.Context(), cl, c)
		if heading == "" {
			heading, detail = "Nothing to decide", fmt.Sprintf("The run is %s: nothing waits for this decision any more.", cp.Status)
		}
		in.decidedPage(w, http.StatusConflict, decidedView{State: "settled", Heading: heading, Detail: detail, Inbox: true})
		return cp, false
	}
	return cp, true
}

// settled says what settled the link's request: the audit record that
// names it (a decision, an expiry, a cancellation), else the last that
// settled a request of the run.
func (in *Inbox) settled(ctx context.Context, cl *client.Client, c links.Claims) (heading, detail string, ok bool) {
	recs, err := cl.VouchedAudit(ctx, c.Flow, c.Run)
	if err != nil {
		return "", "", false
	}
	var found *protocol.AuditRecord
	for _, rec := range slices.Backward(recs) {
		if !slices.Contains(settled, rec.Action) {
			continue
		}
		if rec.RequestID == c.RequestID && rec.Action != protocol.ActionVoted || rec.Replaces == c.RequestID {
			found = &rec
			break
		}
		if found == nil {
			found = &rec
		}
	}
	if found == nil {
		return "", "", false
	}
	rec := *found
	by, at := cmp.Or(rec.By, "Interlock"), linkTime(rec.At)
	switch rec.Action {
	case protocol.ActionExpired:
		return "This request expired", fmt.Sprintf("It expired at %s, before anyone decided.", at), true
	case protocol.ActionEscalated:
		return "This request expired", fmt.Sprintf("It expired at %s and went to %s.", at, cmp.Or(rec.ApproverRole, "other approvers")), true
	case protocol.ActionCancelled:
		detail = fmt.Sprintf("%s cancelled the run at %s.", by, at)
		if rec.Reason != "" {
			detail += " “" + rec.Reason + "”"
		}
		return "This request was cancelled", detail, true
	case protocol.ActionReannounced:
		return "This request was asked again", fmt.Sprintf("It was announced again at %s with a new link; use the newest mail, or the inbox.", at), true
	}
	detail = fmt.Sprintf("Already %s by %s at %s.", rec.Action, by, at)
	if rec.Reason != "" {
		detail += " “" + rec.Reason + "”"
	}
	return "Already decided", detail, true
}

// showDecide renders the decision page of the link's request, with iv's
// errors and values when a form comes back.
func (in *Inbox) showDecide(w http.ResponseWriter, s session, c links.Claims, cp protocol.Checkpoint, status int, iv *interruptView) {
	v := decideView{Person: s.Name, Expires: c.ExpiresAt()}
	v.Flow, v.Run, v.CP = c.Flow, c.Run, cp
	if iv == nil {
		iv = &interruptView{}
	}
	iv.CheckpointInterrupt, iv.StartedBy = *cp.Interrupt, cp.StartedBy
	ci := cp.Interrupt
	iv.MayDecide = in.mayDecide(s, authority.RunOf(cp))
	iv.MayClaim, iv.Mine = false, false // claiming is the inbox's
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
	v.Conversation = conversationOf(cp)
	in.render(w, status, "decide", page{Title: "Decide: " + c.Flow + " " + c.Run, CSRF: in.cfg.Links.FormToken(c.ID), Body: v})
}

// decide answers POST /decide/{link}: the form's decision, sent as the
// link's person with the roles they hold now, once. The link is claimed
// before the decision is sent, so that of two forms racing one decides,
// and given back when the decision was not applied, so that a form the
// engine refused can be put right and sent again.
func (in *Inbox) decide(w http.ResponseWriter, r *http.Request) {
	c, s, ok := in.link(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		in.decidedPage(w, http.StatusBadRequest, decidedView{State: "bad_form", Heading: "The form did not arrive whole", Detail: "Open the link from the mail again and send the form from there."})
		return
	}
	if !in.cfg.Links.CheckFormToken(c.ID, r.PostFormValue("csrf")) {
		in.decidedPage(w, http.StatusForbidden, decidedView{State: "bad_form", Heading: "The form did not come from this page",
			Detail: "Nothing was decided. Open the link from the mail again and decide on its page."})
		return
	}
	cl := in.client(s)
	key := r.PostFormValue("key")
	if !validKey(key) {
		key = ""
	}
	// The same form sent again (a browser's retry, a person sending again
	// after the page hung) is the use it made: applied, it says so; not
	// applied yet (the process that took it stopped), it is sent again
	// with its key, which Interlock applies once.
	use, used, err := in.cfg.Uses.Used(r.Context(), c.ID)
	retry := err == nil && used && use.MadeWith(key)
	if retry {
		if cp, err := cl.Checkpoint(r.Context(), c.Flow, c.Run); err == nil && cp.HasApplied(key) {
			in.decidedPage(w, http.StatusOK, decidedView{State: "done", Heading: "Your decision was recorded",
				Detail: fmt.Sprintf("This form was sent at %s, and Interlock recorded it as %s. This link is now used; you can close this page.", linkTime(use.At), s.Name)})
			return
		}
	}
	if !retry && in.used(w, r, c, s) {
		return
	}
	cp, ok := in.linkCheckpoint(w, r, s, cl, c)
	if !ok {
		return
	}
	iv := &interruptView{CheckpointInterrupt: *cp.Interrupt, StartedBy: cp.StartedBy, Errors: map[string]string{}, Values: map[string]string{}}
	res := protocol.Resume{RequestID: c.RequestID, IdempotencyKey: key}
	kv := viewOf(cp.Interrupt.Kind)
	sent := kv.read(r, iv, &res)
	if spec, ok := protocol.SpecOf(iv.Kind); ok && len(iv.Errors) == 0 {
		if err := spec.Check(iv.Asked(), res.Answer()); err != nil {
			iv.Errors[kv.field(res)] = err.Error()
		}
	}
	if len(iv.Errors) > 0 {
		in.showDecide(w, s, c, cp, http.StatusUnprocessableEntity, iv)
		return
	}
	claim, err := in.cfg.Uses.Claim(r.Context(), c, res.IdempotencyKey, time.Now())
	switch {
	case errors.Is(err, links.ErrUsed):
		if !in.used(w, r, c, s) {
			in.decidedPage(w, http.StatusConflict, decidedView{State: "used", Heading: "This link was used", Detail: "A link decides once.", Inbox: true})
		}
		return
	case err != nil:
		in.linkFail(w, err)
		return
	}
	ev, err := cl.Resume(r.Context(), c.Flow, c.Run, res)
	if httpapi.GivesBack(ev, err) && !claim.Retry {
		if rerr := in.cfg.Uses.Release(context.WithoutCancel(r.Context()), claim); rerr != nil {
			in.log.Error().Err(rerr).Str("flow", c.Flow).Str("run", c.Run).Msg("inbox: a decision link's use was not given back; it stays used")
		}
	}
	var ref protocol.Refused
	var rerr *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		in.decidedPage(w, http.StatusAccepted, decidedView{State: "queued", Heading: "Sent",
			Detail: "Interlock has your " + sent + " but has not applied it yet. This link is now used; the inbox shows the outcome.", Inbox: true})
		return
	case errors.As(err, &rerr):
		ref = rerr.Refused
	case err != nil:
		in.linkFail(w, err)
		return
	case ev.Kind == protocol.EventRefused:
		if err := ev.Decode(&ref); err != nil {
			in.linkFail(w, fmt.Errorf("decoding the refusal: %w", err))
			return
		}
	default:
		in.decidedPage(w, http.StatusOK, decidedView{State: "done", Heading: doneHeading(res, cp.Interrupt),
			Detail: fmt.Sprintf("Interlock recorded it as %s at %s. This link is now used; you can close this page.", s.Name, linkTime(time.Now()))})
		return
	}
	switch ref.Code {
	case protocol.CodeInvalidAnswer:
		iv.Errors[kv.field(res)] = ref.Message
		in.showDecide(w, s, c, cp, http.StatusUnprocessableEntity, iv)
	case protocol.CodeTokenMismatch, protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeStaleCheckpoint:
		heading, detail, ok := in.settled(r.Context(), cl, c)
		if !ok {
			heading, detail = "Nothing to decide", ref.Message
		}
		in.decidedPage(w, http.StatusConflict, decidedView{State: "settled", Heading: heading, Detail: detail + " Your decision was not applied.", Inbox: true})
	default:
		in.decidedPage(w, ref.Code.HTTPStatus(), decidedView{State: "refused", Heading: "Interlock refused your decision",
			Detail: authority.Tell(ref) + " Nothing was decided; the link still works should that change."})
	}
}

// doneHeading says what the person decided.
func doneHeading(res protocol.Resume, in *protocol.CheckpointInterrupt) string {
	what := cmp.Or(in.Title, in.Action)
	switch protocol.Verdict(res.Decision) {
	case protocol.VerdictApprove:
		if in.Quorum != nil {
			return "Your approval of “" + what + "” is in"
		}
		return "You approved “" + what + "”"
	case protocol.VerdictEdit:
		return "You approved “" + what + "” with your edits"
	case protocol.VerdictReject:
		return "You rejected “" + what + "”"
	case protocol.VerdictRespond:
		return "Your response was sent"
	}
	return "Your answer was sent"
}

// linkFail answers a decision link's page that could not reach
// Interlock. The error is logged; the link never is.
func (in *Inbox) linkFail(w http.ResponseWriter, err error) {
	in.log.Error().Err(err).Msg("inbox: a decision link's page failed")
	in.decidedPage(w, http.StatusServiceUnavailable, decidedView{State: "unavailable", Heading: "Interlock is unavailable",
		Detail: "The page could not reach Interlock, and nothing was decided. Try again in a moment."})
}
