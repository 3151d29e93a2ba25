package inbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/protocol"
)

// maxQueue is the most interrupts the queue shows.
const maxQueue = 500

// Views of the queue: every interrupt the caller may act on, those
// assigned to or claimed by the caller, and the approvals of the
// caller's roles.
const (
	viewAll   = ""
	viewMine  = "mine"
	viewRoles = "roles"
)

// Orders of the queue: the soonest deadline first (what waits without
// one last, oldest first), or the oldest first.
const (
	sortDeadline = ""
	sortOldest   = "oldest"
)

// queueView is the data of the queue.
type queueView struct {
	Flow, Role string
	// Q is the search: words every shown interrupt has, in its title,
	// action, question, requester, flow, run or key arguments.
	Q string
	// Sort is sortDeadline or sortOldest.
	Sort string
	// View is viewAll, viewMine or viewRoles; Tabs link to each, with
	// how many each holds under the filters.
	View string
	Tabs []tab
	// Flows and Roles are the choices of the filters.
	Flows, Roles []string
	Items        []queueItem
	// More is set when more interrupts wait than the queue shows.
	More bool
	// Hidden counts the approvals the caller holds no role for.
	Hidden int
	// Partial is the address of the queue's list alone, for live updates.
	Partial, Stream string
	Error           string
	// counts are how many interrupts each view holds: all, mine, my
	// roles.
	counts [3]int
	// Bulk is set when some row may be decided together with others;
	// Key is the bulk form's idempotency key.
	Bulk bool
	Key  string
}

// maxSearch bounds the queue's search, in bytes.
const maxSearch = 200

// tab is one view of the queue, as a link, and how many it holds.
type tab struct {
	Label, Href string
	Count       int
	Current     bool
}

// queueItem is one pending interrupt in the queue.
type queueItem struct {
	protocol.Pending
	Age, Left string
	// Overdue is set when the deadline has passed.
	Overdue bool
	// Proposal says what an approval proposes: its title, else its
	// action.
	Proposal string
	// Consequence says what happens at the deadline.
	Consequence string
	// Votes says how far a quorum is ("1 of 2 approvals").
	Votes string
	// Mine is set when the interrupt is assigned to or claimed by the
	// caller.
	Mine bool
	// Bulk is set when the queue offers it for a decision together with
	// others (see bulkEligible); BulkValue is its checkbox's value.
	Bulk      bool
	BulkValue string
}

// queue answers GET /: the pending interrupts the caller may act on,
// oldest first, filtered by flow and role; ?partial=1 renders the list
// alone, which the page fetches when the stream says something changed.
func (in *Inbox) queue(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	v := queueView{Flow: q.Get("flow"), Role: q.Get("role"), View: q.Get("view"), Q: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort")}
	status := http.StatusOK
	if v.View != viewAll && v.View != viewMine && v.View != viewRoles {
		v.Error, v.View, status = "No such view: "+v.View+". Pick All, Mine or My roles.", viewAll, http.StatusBadRequest
	}
	if v.Sort != sortDeadline && v.Sort != sortOldest {
		v.Error, v.Sort, status = "No such order: "+v.Sort+". Pick the deadline or the oldest first.", sortDeadline, http.StatusBadRequest
	}
	if len(v.Q) > maxSearch {
		v.Error, v.Q, status = fmt.Sprintf("The search is longer than %d characters; search for fewer words.", maxSearch), "", http.StatusBadRequest
	}
	if v.Flow != "" {
		if err := protocol.CheckName("flow", v.Flow); err != nil {
			v.Error, v.Flow, status = strings.TrimPrefix(err.Error(), "client: "), "", http.StatusBadRequest
		}
	}
	if v.Role != "" {
		if err := httpapi.CheckRole(v.Role); err != nil {
			v.Error, v.Role, status = err.Error(), "", http.StatusBadRequest
		}
	}
	v.Key = randomKey()
	if err := in.fillQueue(r, s, &v); err != nil {
		in.log.Error().Err(err).Msg("inbox: reading the pending interrupts")
		v.Error, status = "Interlock could not be reached: "+strings.TrimPrefix(err.Error(), "client: "), http.StatusServiceUnavailable
	}
	params := []string{}
	if v.Flow != "" {
		params = append(params, "flow="+url.QueryEscape(v.Flow))
	}
	if v.Role != "" {
		params = append(params, "role="+url.QueryEscape(v.Role))
	}
	if v.Q != "" {
		params = append(params, "q="+url.QueryEscape(v.Q))
	}
	if v.Sort != sortDeadline {
		params = append(params, "sort="+v.Sort)
	}
	for i, t := range []struct{ label, view string }{{"All", viewAll}, {"Mine", viewMine}, {"My roles", viewRoles}} {
		ps := params
		if t.view != viewAll {
			ps = append(slices.Clip(ps), "view="+t.view)
		}
		href := "/"
		if len(ps) > 0 {
			href += "?" + strings.Join(ps, "&")
		}
		v.Tabs = append(v.Tabs, tab{Label: t.label, Href: href, Count: v.counts[i], Current: t.view == v.View})
	}
	if v.View != viewAll {
		params = append(params, "view="+v.View)
	}
	v.Partial = "/?" + strings.Join(append(params, "partial=1"), "&")
	v.Stream = "/stream"
	if v.Flow != "" {
		v.Stream += "?flow=" + v.Flow
	}
	if q.Get("partial") != "" {
		in.renderTemplate(w, status, "queue", "queue-list", v)
		return
	}
	in.render(w, status, "queue", page{Title: "Inbox", Nav: "queue", Session: &s, CSRF: in.csrf(s), Body: v})
}

func (in *Inbox) fillQueue(r *http.Request, s session, v *queueView) error {
	cl := in.client(s)
	now := time.Now()
	flows, roles := map[string]bool{}, map[string]bool{}
	for _, role := range s.Roles {
		roles[role] = true
	}
	pq := client.PendingQuery{Flow: v.Flow, Limit: client.MaxPendingLimit}
	words := strings.Fields(strings.ToLower(v.Q))
	for {
		pg, err := cl.ListPending(r.Context(), pq)
		if err != nil {
			return err
		}
		for _, p := range pg.Items {
			flows[p.Flow] = true
			restricted := protocol.RoleRestricted(p.Kind)
			// Mine: assigned to or claimed by the caller, or by someone
			// away who named them (never that person's absence itself).
			me := func(name string) bool {
				return name == s.Name || p.Action != protocol.AbsenceAction && slices.Contains(s.For, name)
			}
			mine := me(p.ClaimedBy) || p.ClaimedBy == "" && slices.ContainsFunc(p.Assignees, me)
			if restricted {
				// Claimed by someone else, it stays in the queue of those
				// who could decide it, marked as claimed.
				entry := authority.EntryOf(p)
				entry.Pending.ClaimedBy = ""
				if !mine && !in.mayDecide(s, entry) {
					v.Hidden++
					continue
				}
				if p.ApproverRole != "" {
					roles[p.ApproverRole] = true
				}
				if p.Quorum != nil {
					for _, rc := range p.Quorum.Roles {
						roles[rc.Role] = true
					}
				}
			}
			if v.Role != "" && p.ApproverRole != v.Role && !quorumHas(p.Quorum, v.Role) {
				continue
			}
			if !matches(p, words) {
				continue
			}
			inRoles := restricted && s.holdsAny(p.ApproverRole, p.Quorum)
			v.counts[0]++
			if mine {
				v.counts[1]++
			}
			if inRoles {
				v.counts[2]++
			}
			switch v.View {
			case viewMine:
				if !mine {
					continue
				}
			case viewRoles:
				if !inRoles {
					continue
				}
			}
			it := queueItem{Pending: p, Age: duration(now.Sub(p.AskedAt)), Proposal: cmp.Or(p.Title, p.Action), Mine: mine}
			if p.ExpiresAt != nil {
				left := p.ExpiresAt.Sub(now)
				it.Overdue = left <= 0
				it.Left = duration(left)
				it.Consequence = p.OnTimeout.Consequence()
			}
			if p.Quorum != nil {
				it.Votes = fmt.Sprintf("%d of %d approvals", len(p.Voters), p.Quorum.Total())
			}
			if it.Bulk = in.bulkEligible(s, p); it.Bulk {
				it.BulkValue = bulkValue(p)
				v.Bulk = true
			}
			v.Items = append(v.Items, it)
		}
		if pg.Next == "" {
			break
		}
		pq.After = pg.Next
	}
	// The pending index lists the oldest first; the soonest deadline is
	// the most urgent fact, what waits without one comes last.
	if v.Sort == sortDeadline {
		slices.SortStableFunc(v.Items, func(a, b queueItem) int {
			switch {
			case a.ExpiresAt == nil && b.ExpiresAt == nil:
				return 0
			case a.ExpiresAt == nil:
				return 1
			case b.ExpiresAt == nil:
				return -1
			}
			return a.ExpiresAt.Compare(*b.ExpiresAt)
		})
	}
	if len(v.Items) > maxQueue {
		v.Items, v.More = v.Items[:maxQueue], true
	}
	v.Flows, v.Roles = sortedKeys(flows, v.Flow), sortedKeys(roles, v.Role)
	return nil
}

// matches reports whether p has every one of words (lower case) in
// what the queue shows of it.
func matches(p protocol.Pending, words []string) bool {
	if len(words) == 0 {
		return true
	}
	parts := []string{p.Title, p.Action, p.Question, p.Requester, p.Flow, p.Run, p.ClaimedBy, strings.Join(p.Assignees, " "), strings.Join(p.Fields, " ")}
	for _, a := range p.KeyArgs {
		parts = append(parts, a.Title, a.Text)
	}
	text := strings.ToLower(strings.Join(parts, " "))
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// quorumHas reports whether a quorum counts approvers of role.
func quorumHas(q *protocol.Quorum, role string) bool {
	if q == nil {
		return false
	}
	return slices.ContainsFunc(q.Roles, func(rc protocol.RoleCount) bool { return rc.Role == role })
}

func sortedKeys(m map[string]bool, also string) []string {
	if also != "" {
		m[also] = true
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// duration says d for a person: "45s", "12m", "3h 20m", "2d 4h".
func duration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

var funcs = template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"join": strings.Join,
	"add":  func(a, b int) int { return a + b },
	"speedTable": func(id, caption, col string, rows []speedRow) map[string]any {
		return map[string]any{"ID": id, "Caption": caption, "Col": col, "Rows": rows}
	},
	"has": func(list []protocol.Verdict, s string) bool { return slices.Contains(list, protocol.Verdict(s)) },
	"errorText": func(ctx string) string {
		return strings.TrimSpace(strings.TrimPrefix(ctx, "ERROR:"))
	},
	"isError":     func(ctx string) bool { return strings.HasPrefix(ctx, "ERROR:") },
	"compactJSON": func(raw json.RawMessage) string { return compact(raw) },
}
