package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// Page sizes of GET /v1/interrupts.
const (
	// DefaultLimit is the page size when the request has no limit.
	DefaultLimit = 50
	// MaxLimit is the largest page.
	MaxLimit = 1000
)

// Orders of GET /v1/interrupts, by when the interrupt was asked.
const (
	OrderOldest = "oldest"
	OrderNewest = "newest"
)

// InterruptPage is the answer of GET /v1/interrupts.
type InterruptPage struct {
	// Items are the pending interrupts, as the pending index holds them.
	Items []protocol.Pending `json:"items"`
	// Next is the cursor of the following page; absent on the last.
	Next string `json:"next,omitempty"`
	// Total is how many interrupts of the flow filter wait (of every flow
	// without one). It is absent when the request filters by kind or
	// role, which only the entries themselves tell: count those with the
	// interlock_pending_interrupts metric.
	Total *uint64 `json:"total,omitempty"`
}

// listInterrupts answers GET /v1/interrupts: a page of the pending index
// (what waits now, never a finished run), read in the index's order from
// the cursor on. Oldest first, a page costs the same however many
// interrupts wait; newest first the server looks at the last entry of
// every key of the index, and a flow filter counts the flow's entries for
// the total, so those cost in proportion to what waits (see
// client.PendingQuery); kind or role filters cost the entries read to fill
// the page.
func (s *Server) listInterrupts(w http.ResponseWriter, r *http.Request, c Caller) {
	q, err := parseInterruptQuery(r)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidQuery, err.Error()))
		return
	}
	page, err := s.client(c, 0).ListPending(r.Context(), q)
	if err != nil {
		if errors.Is(err, client.ErrCursor) {
			writeProblem(w, newProblem(CodeInvalidQuery, strings.TrimPrefix(err.Error(), "client: ")))
			return
		}
		s.fail(w, err)
		return
	}
	// An ask's or a tool call's entry is listed for whoever asked and
	// whoever may decide it (a page may so come shorter than its limit).
	items := page.Items[:0]
	for _, p := range page.Items {
		if s.port.Authority().MayRead(c, authority.EntryOf(p)) == nil {
			items = append(items, p)
		}
	}
	out := InterruptPage{Items: items, Next: page.Next}
	if len(q.Kinds) == 0 && len(q.Roles) == 0 {
		out.Total = &page.Total
	}
	writeJSON(w, http.StatusOK, out)
}

func parseInterruptQuery(r *http.Request) (client.PendingQuery, error) {
	v := r.URL.Query()
	for k := range v {
		switch k {
		case "flow", "kind", "role", "order", "limit", "cursor":
		default:
			return client.PendingQuery{}, fmt.Errorf("unknown query parameter %q; this route takes flow, kind, role, order, limit and cursor", k)
		}
	}
	q := client.PendingQuery{Flow: v.Get("flow"), Limit: DefaultLimit, After: v.Get("cursor")}
	if len(v["flow"]) > 1 {
		return q, errors.New("flow: give one flow (or none for every flow)")
	}
	if q.Flow != "" {
		if err := protocol.CheckName("flow", q.Flow); err != nil {
			return q, errors.New(strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	for _, k := range v["kind"] {
		if _, ok := protocol.SpecOf(k); !ok {
			return q, fmt.Errorf("kind=%q: use %s", k, protocol.KindsText())
		}
		q.Kinds = append(q.Kinds, k)
	}
	for _, role := range v["role"] {
		if err := CheckRole(role); err != nil {
			return q, err
		}
		q.Roles = append(q.Roles, role)
	}
	switch order := cmp.Or(v.Get("order"), OrderOldest); order {
	case OrderOldest:
	case OrderNewest:
		q.Newest = true
	default:
		return q, fmt.Errorf("order=%q: use oldest or newest", order)
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
