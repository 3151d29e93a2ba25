package inbox

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/away"
	"github.com/interlockhq/interlock/httpapi"
)

// awayView is the data of the absence page.
type awayView struct {
	// Mine is the person's absence in force or to come.
	Mine *authority.Absence
	// Deciding are the absences in force that name the person delegate.
	Deciding []authority.Absence
	// Roles are the person's own roles, to delegate.
	Roles []string
	// Values and Errors are the form's, sent back.
	Values map[string]string
	Chosen map[string]bool
	Error  string
	Notice string
}

// awayLayout is how the page's date fields are written (UTC).
const awayLayout = "2006-01-02T15:04"

// awaySet is the port's absences, or nil.
func (in *Inbox) awaySet() *away.Set {
	if p, ok := in.port.(httpapi.AwayPort); ok {
		return p.Away()
	}
	return nil
}

// awayPage answers GET /away: the person's absence, whom they decide
// for, and the form to name a delegate.
func (in *Inbox) awayPage(w http.ResponseWriter, r *http.Request, s session) {
	v := awayView{Values: map[string]string{}, Chosen: map[string]bool{}}
	switch r.URL.Query().Get("sent") {
	case "begun":
		v.Notice = "Your absence is set: your delegate decides for you meanwhile."
	case "ended":
		v.Notice = "Your absence is over: what waits on you is yours again."
	}
	in.showAway(w, r, s, http.StatusOK, v)
}

func (in *Inbox) showAway(w http.ResponseWriter, r *http.Request, s session, status int, v awayView) {
	set := in.awaySet()
	if set == nil || in.directory(false) == nil {
		in.errorPage(w, r, s, http.StatusNotFound, "No absences here", "Absences take a directory of people (serve --people): without one every caller is the local user.")
		return
	}
	now := time.Now()
	if ab, _, ok := set.Coming(s.Name, now); ok {
		v.Mine = &ab
	}
	v.Deciding = set.For(s.Name, now)
	if p, ok := in.directory(false).Person(s.Name); ok {
		v.Roles = p.Roles
	}
	in.render(w, status, "away", page{Title: "Away", Nav: "away", Session: &s, CSRF: in.csrf(s), Body: v})
}

// awayPost answers POST /away: op begin names a delegate, op end ends
// the person's absence now.
func (in *Inbox) awayPost(w http.ResponseWriter, r *http.Request, s session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		in.errorPage(w, r, s, http.StatusBadRequest, "The form did not arrive whole", "Send it again.")
		return
	}
	if !in.checkCSRF(r, s) {
		in.errorPage(w, r, s, http.StatusForbidden, "The form has expired", "Load the page again and send the form from there.")
		return
	}
	set := in.awaySet()
	dir := in.directory(false)
	if set == nil || dir == nil {
		in.errorPage(w, r, s, http.StatusNotFound, "No absences here", "Absences take a directory of people (serve --people).")
		return
	}
	cl := in.client(s)
	now := time.Now()
	if r.PostFormValue("op") == "end" {
		switch _, err := away.End(r.Context(), cl, set, s.Name, now); {
		case errors.Is(err, away.ErrNone):
			in.showAway(w, r, s, http.StatusConflict, awayView{Error: "You have no absence to end.", Values: map[string]string{}, Chosen: map[string]bool{}})
		case err != nil:
			in.fail(w, r, s, err)
		default:
			http.Redirect(w, r, "/away?sent=ended", http.StatusSeeOther)
		}
		return
	}
	v := awayView{Values: map[string]string{}, Chosen: map[string]bool{}}
	for _, k := range []string{"delegate", "from", "to"} {
		v.Values[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	req := away.Request{Delegate: v.Values["delegate"]}
	for _, role := range r.PostForm["role"] {
		req.Roles = append(req.Roles, role)
		v.Chosen[role] = true
	}
	var err error
	if req.To, err = time.Parse(awayLayout, v.Values["to"]); err != nil {
		v.Error = "Say until when you are away (a date and a time, UTC)."
		in.showAway(w, r, s, http.StatusUnprocessableEntity, v)
		return
	}
	if v.Values["from"] != "" {
		from, err := time.Parse(awayLayout, v.Values["from"])
		if err != nil {
			v.Error = "From is not a date and a time (UTC); leave it empty to start now."
			in.showAway(w, r, s, http.StatusUnprocessableEntity, v)
			return
		}
		req.From = &from
	}
	var roles []string
	if p, ok := dir.Person(s.Name); ok {
		roles = p.Roles
	}
	switch _, err := away.Begin(r.Context(), cl, set, dir, s.Name, roles, req, now); {
	case errors.Is(err, away.ErrInvalid):
		v.Error = strings.TrimPrefix(err.Error(), away.ErrInvalid.Error()+": ")
		in.showAway(w, r, s, http.StatusUnprocessableEntity, v)
	case errors.Is(err, away.ErrInForce):
		v.Error = "You have an absence in force or to come already: end it first."
		in.showAway(w, r, s, http.StatusConflict, v)
	case err != nil:
		in.fail(w, r, s, err)
	default:
		http.Redirect(w, r, "/away?sent=begun", http.StatusSeeOther)
	}
}
