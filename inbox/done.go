package inbox

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// donePage is how many finished runs a page of the done view reads.
const donePage = 50

// doneView is the data of the done view.
type doneView struct {
	Flow, Status string
	// Flows and Statuses are the choices of the filters.
	Flows, Statuses []string
	Items           []doneItem
	// Hidden counts the runs on this page that ended at an approval of a
	// role the caller does not hold.
	Hidden int
	// Older is the address of the next page; Newest of the first, when
	// this is not it.
	Older, Newest string
	// Partial and Stream make the first page update itself.
	Partial, Stream string
	Error           string
}

// doneItem is one finished run.
type doneItem struct {
	client.RunItem
	// Result is how it ended in a word (approved, rejected, expired...),
	// the badge; Bad marks one to look at (rejected, expired, failed).
	Result protocol.Outcome
	Bad    bool
	// Outcome says more of how it ended, when the word alone does not;
	// Ago how long ago.
	Outcome, Ago string
}

// done answers GET /done: the runs that finished, newest first, each with
// how it ended, a page at a time (?after=), filtered by flow and status.
// As the queue does, it leaves out the runs whose last interrupt was an
// approval of a role the caller does not hold, and counts them.
func (in *Inbox) done(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	v := doneView{Flow: q.Get("flow"), Status: q.Get("status"), Statuses: wire.FinishedStatuses}
	after := q.Get("after")
	status := http.StatusOK
	if v.Flow != "" {
		if err := client.CheckName("flow", v.Flow); err != nil {
			v.Error, v.Flow, after, status = strings.TrimPrefix(err.Error(), "client: "), "", "", http.StatusBadRequest
		}
	}
	if v.Status != "" && !slices.Contains(wire.FinishedStatuses, v.Status) {
		v.Error, v.Status, after, status = "No such status: "+v.Status+". Pick one of the list.", "", "", http.StatusBadRequest
	}
	params := url.Values{}
	if v.Flow != "" {
		params.Set("flow", v.Flow)
	}
	if v.Status != "" {
		params.Set("status", v.Status)
	}
	if status == http.StatusOK {
		if err := in.fillDone(r, s, after, params, &v); err != nil {
			switch {
			case errors.Is(err, client.ErrCursor):
				v.Error, status = "This page's address is not one the list made. Start again from the newest.", http.StatusBadRequest
			default:
				in.log.Error().Err(err).Msg("inbox: reading the finished runs")
				v.Error, status = "Interlock could not be reached: "+strings.TrimPrefix(err.Error(), "client: "), http.StatusServiceUnavailable
			}
		}
	}
	seen := map[string]bool{}
	for _, it := range v.Items {
		seen[it.Flow] = true
	}
	v.Flows = sortedKeys(seen, v.Flow)
	if after != "" {
		v.Newest = "/done"
		if len(params) > 0 {
			v.Newest += "?" + params.Encode()
		}
	} else {
		// The first page follows the runs as they finish.
		p := url.Values{"partial": {"1"}}
		for k, vs := range params {
			p[k] = vs
		}
		v.Partial, v.Stream = "/done?"+p.Encode(), "/stream"
		if v.Flow != "" {
			v.Stream += "?flow=" + url.QueryEscape(v.Flow)
		}
	}
	if q.Get("partial") != "" {
		in.renderTemplate(w, status, "done", "done-list", v)
		return
	}
	in.render(w, status, "done", page{Title: "Done", Nav: "done", Session: &s, CSRF: in.csrf(s), Body: v})
}

func (in *Inbox) fillDone(r *http.Request, s session, after string, params url.Values, v *doneView) error {
	statuses := []string{client.StatusFinished}
	if v.Status != "" {
		statuses = []string{v.Status}
	}
	pg, err := in.client(s).ListRuns(r.Context(), client.RunsQuery{Flow: v.Flow, Statuses: statuses, Limit: donePage, After: after})
	if err != nil {
		return err
	}
	now := time.Now()
	for _, it := range pg.Items {
		if f := it.Finished; f != nil {
			// A finished approval is listed, as an ask or a tool call
			// is, for whoever started it, could decide it or decided
			// it, and the read roles: the authority's rule for a
			// private run.
			run := authority.FinishedOf(*f)
			run.Private = run.Private || f.Interrupt != nil && protocol.RoleRestricted(f.Interrupt.Kind)
			if in.port.Authority().MayRead(s.Caller, run) != nil {
				v.Hidden++
				continue
			}
		}
		d := doneItem{RunItem: it, Outcome: it.Outcome(), Ago: duration(now.Sub(it.ChangedAt)), Result: protocol.Outcome(it.Status)}
		if f := it.Finished; f != nil {
			d.Result = f.Outcome()
		}
		d.Bad = d.Result.Bad()
		if d.Outcome == it.Status || d.Outcome == string(d.Result) {
			d.Outcome = "" // the badge says it all
		}
		v.Items = append(v.Items, d)
	}
	if pg.Next != "" {
		p := url.Values{"after": {pg.Next}}
		for k, vs := range params {
			p[k] = vs
		}
		v.Older = "/done?" + p.Encode()
	}
	return nil
}
