package inbox

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// teamWindows are the periods the team page reports on, by name.
var teamWindows = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// maxTeamRecords bounds the audit records one team page reads: a window
// busier than that is reported on its first records, and says so.
const maxTeamRecords = 100_000

// teamView is the data of the team page: how fast the team decides,
// from the audit of the window, and what waits now, from the pending
// index.
type teamView struct {
	Window  string
	Windows []string
	Since   time.Time
	// Records counts the audit records read; Capped is set when the
	// window held more than maxTeamRecords.
	Records int
	Capped  bool
	// Decided counts the decisions and answers of the window whose ask
	// the window also holds.
	Decided                      int
	ByRole, ByApprover, ByAction []speedRow
	Reminders, Escalations       int
	Expired                      int
	// Waiting is what waits now, by role; Ages by how long.
	Waiting             []waitRow
	Ages                []ageRow
	WaitingNow, Overdue int
	DueSoon             int
	Bottleneck, Slowest string
	Queries             map[string]string
}

// speedRow is how fast one role, person or action had its requests
// decided: how many, and the median and 90th percentile of the time from
// the ask to the decision.
type speedRow struct {
	Name        string
	Count       int
	Median, P90 string
	median      time.Duration
}

// waitRow is what waits now for one role (or named people).
type waitRow struct {
	Who            string
	Count, Overdue int
	Oldest         string
	oldest         time.Duration
}

// ageRow counts what waits now by how long it has.
type ageRow struct {
	Label string
	Count int
}

// asked is an interrupt of the window: when it was asked, of which role
// and action.
type asked struct {
	at           time.Time
	role, action string
}

// team answers GET /team: how fast the team decides, by role, person and
// action, what waits now, and where it piles up; for who may read every
// run.
func (in *Inbox) team(w http.ResponseWriter, r *http.Request, s session) {
	var ref *authority.Refusal
	if err := in.port.Authority().MayReadAll(s.Caller); errors.As(err, &ref) {
		in.errorPage(w, r, s, http.StatusForbidden, "Not yours to read", authority.Tell(protocol.Refused{Code: ref.Code, Message: cmp.Or(ref.Say, ref.Reason)}))
		return
	}
	v := teamView{Window: cmp.Or(r.URL.Query().Get("window"), "7d")}
	window, ok := teamWindows[v.Window]
	if !ok {
		in.errorPage(w, r, s, http.StatusBadRequest, "No such window", "Report on 24h, 7d or 30d.")
		return
	}
	v.Windows = slices.SortedFunc(maps.Keys(teamWindows), func(a, b string) int { return cmp.Compare(teamWindows[a], teamWindows[b]) })
	now := time.Now()
	v.Since = now.Add(-window)
	cl := in.client(s)
	if err := in.teamDecisions(r, cl, &v); err != nil {
		in.fail(w, r, s, err)
		return
	}
	if err := in.teamWaiting(r, cl, now, &v); err != nil {
		in.fail(w, r, s, err)
		return
	}
	v.Queries = teamQueries(v.Window)
	in.render(w, http.StatusOK, "team", page{Title: "Team", Nav: "team", Session: &s, CSRF: in.csrf(s), Body: v})
}

// teamDecisions reads the window's audit records: the time from each ask
// to its decision, by role, person and action; reminders, escalations
// and expiries.
func (in *Inbox) teamDecisions(r *http.Request, cl *client.Client, v *teamView) error {
	recs, more, err := cl.AuditSince(r.Context(), v.Since, maxTeamRecords)
	if err != nil {
		return err
	}
	v.Records, v.Capped = len(recs), more
	asks := map[string]asked{}
	key := func(flow, run, requestID string) string { return flow + "\x00" + run + "\x00" + requestID }
	byRole, byPerson, byAction := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, rec := range recs {
		if o := rec.Outcome; rec.Paused() {
			a := asked{at: rec.At, role: o.ApproverRole, action: rec.Flow}
			if o.Approval != nil && o.Approval.Action != "" {
				a.action = o.Approval.Action
			}
			asks[key(rec.Flow, rec.Run, o.RequestID)] = a
		} else if o != nil && o.RequestID != "" && o.RequestID != rec.RequestID {
			// The same ask under a new request (a quorum's next vote, a
			// reannounce): its clock runs on.
			if a, ok := asks[key(rec.Flow, rec.Run, rec.RequestID)]; ok {
				asks[key(rec.Flow, rec.Run, o.RequestID)] = a
			}
		}
		if rec.Replaces != "" {
			if a, ok := asks[key(rec.Flow, rec.Run, rec.Replaces)]; ok {
				a.role = cmp.Or(rec.ApproverRole, a.role)
				asks[key(rec.Flow, rec.Run, rec.RequestID)] = a
			}
		}
		switch rec.Action {
		case protocol.ActionApproved, protocol.ActionEdited, protocol.ActionRejected, protocol.ActionResponded,
			protocol.ActionAnswered, protocol.ActionVoted:
			a, ok := asks[key(rec.Flow, rec.Run, rec.RequestID)]
			if !ok || rec.Timeout {
				continue
			}
			d := rec.At.Sub(a.at)
			byRole[cmp.Or(a.role, "(no role)")] = append(byRole[cmp.Or(a.role, "(no role)")], d)
			byPerson[cmp.Or(rec.By, "(unknown)")] = append(byPerson[cmp.Or(rec.By, "(unknown)")], d)
			byAction[a.action] = append(byAction[a.action], d)
			if rec.Action != protocol.ActionVoted {
				v.Decided++
			}
		case protocol.ActionReminded:
			v.Reminders++
		case protocol.ActionEscalated:
			v.Escalations++
		case protocol.ActionExpired:
			v.Expired++
		}
	}
	v.ByRole, v.ByApprover, v.ByAction = speeds(byRole), speeds(byPerson), speeds(byAction)
	var slowest *speedRow
	for i, p := range v.ByApprover {
		if p.Count >= 3 && (slowest == nil || p.median > slowest.median) {
			slowest = &v.ByApprover[i]
		}
	}
	if slowest != nil {
		v.Slowest = fmt.Sprintf("%s takes the longest: a median of %s over %d decisions.", slowest.Name, slowest.Median, slowest.Count)
	}
	return nil
}

// speeds are the rows of groups, the most decided first.
func speeds(groups map[string][]time.Duration) []speedRow {
	out := make([]speedRow, 0, len(groups))
	for name, ds := range groups {
		slices.Sort(ds)
		med, p90 := ds[len(ds)/2], ds[max(0, (len(ds)*9+9)/10-1)]
		out = append(out, speedRow{Name: name, Count: len(ds), Median: duration(med), P90: duration(p90), median: med})
	}
	slices.SortFunc(out, func(a, b speedRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
	})
	return out
}

// teamWaiting reads what waits now from the pending index: by role, by
// age, overdue and due within the hour, and where most piles up.
func (in *Inbox) teamWaiting(r *http.Request, cl *client.Client, now time.Time, v *teamView) error {
	byWho := map[string]*waitRow{}
	ages := []ageRow{{Label: "less than an hour"}, {Label: "1 hour to 1 day"}, {Label: "1 to 7 days"}, {Label: "more than 7 days"}}
	pq := client.PendingQuery{Limit: client.MaxPendingLimit}
	for {
		pg, err := cl.ListPending(r.Context(), pq)
		if err != nil {
			return err
		}
		for _, p := range pg.Items {
			v.WaitingNow++
			who := "role " + p.ApproverRole
			switch {
			case p.ClaimedBy != "":
				who = p.ClaimedBy + " (claimed)"
			case p.ApproverRole == "" && len(p.Assignees) > 0:
				who = strings.Join(p.Assignees, ", ")
			case p.ApproverRole == "":
				who = "anyone (questions and choices)"
			}
			row := byWho[who]
			if row == nil {
				row = &waitRow{Who: who}
				byWho[who] = row
			}
			row.Count++
			age := now.Sub(p.AskedAt)
			if age > row.oldest {
				row.oldest, row.Oldest = age, duration(age)
			}
			switch {
			case age < time.Hour:
				ages[0].Count++
			case age < 24*time.Hour:
				ages[1].Count++
			case age < 7*24*time.Hour:
				ages[2].Count++
			default:
				ages[3].Count++
			}
			if p.ExpiresAt != nil {
				switch left := p.ExpiresAt.Sub(now); {
				case left <= 0:
					row.Overdue++
					v.Overdue++
				case left <= time.Hour:
					v.DueSoon++
				}
			}
		}
		if pg.Next == "" {
			break
		}
		pq.After = pg.Next
	}
	for _, row := range byWho {
		v.Waiting = append(v.Waiting, *row)
	}
	slices.SortFunc(v.Waiting, func(a, b waitRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.oldest, a.oldest), strings.Compare(a.Who, b.Who))
	})
	v.Ages = ages
	if len(v.Waiting) > 0 {
		b := v.Waiting[0]
		v.Bottleneck = fmt.Sprintf("Most waits on %s: %d, the oldest for %s.", b.Who, b.Count, b.Oldest)
	}
	return nil
}

// teamQueries are the Prometheus queries of the page's figures, over
// window, from the metrics the workers export.
func teamQueries(window string) map[string]string {
	return map[string]string{
		"action":    fmt.Sprintf(`histogram_quantile(0.5, sum by (le, action) (rate(interlock_time_to_decision_seconds_bucket{verb="resume"}[%s])))`, window),
		"action90":  fmt.Sprintf(`histogram_quantile(0.9, sum by (le, action) (rate(interlock_time_to_decision_seconds_bucket{verb="resume"}[%s])))`, window),
		"decided":   fmt.Sprintf(`sum by (outcome) (increase(interlock_decisions_total{by="approver"}[%s]))`, window),
		"waiting":   `sum by (approver_role) (interlock_pending_interrupts)`,
		"oldest":    `max by (flow) (interlock_pending_oldest_age_seconds)`,
		"overdue":   `sum(interlock_pending_overdue_interrupts)`,
		"reminders": fmt.Sprintf(`sum(increase(interlock_reminders_total[%s]))`, window),
		"escalated": fmt.Sprintf(`sum(increase(interlock_escalations_total[%s]))`, window),
		"expired":   fmt.Sprintf(`sum(increase(interlock_expiries_total[%s]))`, window),
	}
}
