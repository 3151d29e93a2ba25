package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
)

// RunList is the answer of GET /v1/runs: a page of runs of every status
// asked for, newest first by when each last changed.
type RunList = client.RunsPage

// listRuns answers GET /v1/runs: a page of runs, newest first by when
// each last changed, from the pending index (waiting runs) and the
// finished-runs index (one stream per finished status), read backwards
// from the cursor on; a page costs about a page of each status listed,
// however many runs are stored (see client.ListRuns).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, c Caller) {
	q, err := parseRunsQuery(r)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidQuery, err.Error()))
		return
	}
	page, err := s.client(c, 0).ListRuns(r.Context(), q)
	if err != nil {
		if errors.Is(err, client.ErrCursor) || errors.Is(err, client.ErrStatus) {
			writeProblem(w, newProblem(CodeInvalidQuery, strings.TrimPrefix(err.Error(), "client: ")))
			return
		}
		s.fail(w, err)
		return
	}
	// An ask's or a tool call's item is listed for whoever asked and
	// whoever may (or could) decide it.
	items := page.Items[:0]
	for _, it := range page.Items {
		var run authority.Run
		switch {
		case it.Pending != nil:
			run = authority.EntryOf(*it.Pending)
		case it.Finished != nil:
			run = authority.FinishedOf(*it.Finished)
		}
		if run.Flow == "" || s.port.Authority().MayRead(c, run) == nil {
			items = append(items, it)
		}
	}
	page.Items = items
	writeJSON(w, http.StatusOK, page)
}

func parseRunsQuery(r *http.Request) (client.RunsQuery, error) {
	v := r.URL.Query()
	for k := range v {
		switch k {
		case "flow", "status", "limit", "after":
		default:
			return client.RunsQuery{}, fmt.Errorf("unknown query parameter %q; this route takes flow, status, limit and after", k)
		}
	}
	q := client.RunsQuery{Flow: v.Get("flow"), Limit: DefaultLimit, After: v.Get("after")}
	if len(v["flow"]) > 1 {
		return q, errors.New("flow: give one flow (or none for every flow)")
	}
	if len(v["after"]) > 1 {
		return q, errors.New("after: give one cursor, the next of the previous page")
	}
	if q.Flow != "" {
		if err := client.CheckName("flow", q.Flow); err != nil {
			return q, errors.New(strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	listed := append(client.RunsStatuses(), client.StatusFinished)
	for _, status := range v["status"] {
		switch {
		case status == client.StatusRunning:
			return q, errors.New("status=running: runs are not listed while running: a run is running only while a worker is inside a transition (a step recorded, its node not finished), and no index holds it then; read the run with GET /v1/runs/{flow}/{run}")
		case !slices.Contains(listed, status):
			return q, fmt.Errorf("status=%q: use %s (repeat for more)", status, strings.Join(listed, ", "))
		}
		q.Statuses = append(q.Statuses, status)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLimit {
			return q, fmt.Errorf("limit=%q: use 1 to %d", l, MaxLimit)
		}
		q.Limit = n
	}
	return q, nil
}
