package httpapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
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
	Items []events.Pending `json:"items"`
	// Next is the cursor of the following page; absent on the last.
	Next string `json:"next,omitempty"`
	// Total is how many pending interrupts match the filters.
	Total int `json:"total"`
}

// interruptQuery is what GET /v1/interrupts was asked.
type interruptQuery struct {
	flow  string
	kinds []string
	roles []string
	order string
	limit int
	after *cursor
}

// listInterrupts answers GET /v1/interrupts. It reads the whole pending
// index (what waits now, never a finished run), filters and sorts it, and
// returns a page: the cost is O(pending) per page.
func (s *Server) listInterrupts(w http.ResponseWriter, r *http.Request, c Caller) {
	q, err := parseInterruptQuery(r)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidQuery, err.Error()))
		return
	}
	all, err := readPending(r, s.client(c, 0), q.flow)
	if err != nil {
		s.fail(w, err)
		return
	}
	matched := all[:0]
	for _, p := range all {
		if (len(q.kinds) == 0 || slices.Contains(q.kinds, p.Kind)) &&
			(len(q.roles) == 0 || slices.Contains(q.roles, p.ApproverRole)) {
			matched = append(matched, p)
		}
	}
	slices.SortFunc(matched, func(a, b events.Pending) int { return q.compare(keyOf(a), keyOf(b)) })
	start := 0
	if q.after != nil {
		start, _ = slices.BinarySearchFunc(matched, q.after.key, func(p events.Pending, k pendingKey) int {
			if q.compare(keyOf(p), k) <= 0 {
				return -1
			}
			return 1
		})
	}
	page := InterruptPage{Items: []events.Pending{}, Total: len(matched)}
	end := min(start+q.limit, len(matched))
	page.Items = append(page.Items, matched[start:end]...)
	if end < len(matched) {
		page.Next = cursor{order: q.order, key: keyOf(matched[end-1])}.String()
	}
	writeJSON(w, http.StatusOK, page)
}

// readPending reads every entry of the pending index (of one flow, if
// flow is set), a page of client.MaxPendingLimit at a time.
func readPending(r *http.Request, cl *client.Client, flow string) ([]events.Pending, error) {
	var all []events.Pending
	next := ""
	for {
		page, err := cl.ListPending(r.Context(), client.PendingQuery{Flow: flow, Limit: client.MaxPendingLimit, After: next})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all, nil
		}
		next = page.Next
	}
}

func parseInterruptQuery(r *http.Request) (interruptQuery, error) {
	v := r.URL.Query()
	for k := range v {
		switch k {
		case "flow", "kind", "role", "order", "limit", "cursor":
		default:
			return interruptQuery{}, fmt.Errorf("unknown query parameter %q; this route takes flow, kind, role, order, limit and cursor", k)
		}
	}
	q := interruptQuery{flow: v.Get("flow"), order: cmp.Or(v.Get("order"), OrderOldest), limit: DefaultLimit}
	if len(v["flow"]) > 1 {
		return q, errors.New("flow: give one flow (or none for every flow)")
	}
	if q.flow != "" {
		if err := client.CheckName("flow", q.flow); err != nil {
			return q, errors.New(strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	for _, k := range v["kind"] {
		switch k {
		case "question", "choice", "approval":
			q.kinds = append(q.kinds, k)
		default:
			return q, fmt.Errorf("kind=%q: use question, choice or approval", k)
		}
	}
	for _, role := range v["role"] {
		if err := CheckRole(role); err != nil {
			return q, err
		}
		q.roles = append(q.roles, role)
	}
	if q.order != OrderOldest && q.order != OrderNewest {
		return q, fmt.Errorf("order=%q: use oldest or newest", q.order)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLimit {
			return q, fmt.Errorf("limit=%q: use 1 to %d", l, MaxLimit)
		}
		q.limit = n
	}
	if cs := v.Get("cursor"); cs != "" {
		cur, err := parseCursor(cs)
		if err != nil {
			return q, err
		}
		if cur.order != q.order {
			return q, fmt.Errorf("the cursor is of a page in %s-first order, and this request asks for %s first; keep the order while paging", cur.order, q.order)
		}
		q.after = &cur
	}
	return q, nil
}

// pendingKey orders pending interrupts: by when they were asked, then by
// flow and run, so that the order is total and a cursor is a position.
type pendingKey struct {
	at   time.Time
	flow string
	run  string
}

func keyOf(p events.Pending) pendingKey { return pendingKey{at: p.AskedAt, flow: p.Flow, run: p.Run} }

// compare orders two keys in the query's order.
func (q interruptQuery) compare(a, b pendingKey) int {
	c := cmp.Or(a.at.Compare(b.at), cmp.Compare(a.flow, b.flow), cmp.Compare(a.run, b.run))
	if q.order == OrderNewest {
		return -c
	}
	return c
}

// cursor is where a page ended: the key of its last item, in its order.
type cursor struct {
	order string
	key   pendingKey
}

// cursorVersion versions the cursor's encoding.
const cursorVersion = "i1"

type cursorJSON struct {
	V     string    `json:"v"`
	Order string    `json:"o"`
	At    time.Time `json:"t"`
	Flow  string    `json:"f"`
	Run   string    `json:"r"`
}

// String encodes the cursor, opaque to callers.
func (c cursor) String() string {
	b, _ := json.Marshal(cursorJSON{V: cursorVersion, Order: c.order, At: c.key.at, Flow: c.key.flow, Run: c.key.run})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor decodes a cursor of String.
func parseCursor(s string) (cursor, error) {
	bad := fmt.Errorf("cursor=%q is not a cursor of this API: pass the next of a previous page", truncate(s, 40))
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	var j cursorJSON
	if err := json.Unmarshal(b, &j); err != nil || j.V != cursorVersion || j.Order != OrderOldest && j.Order != OrderNewest {
		return cursor{}, bad
	}
	return cursor{order: j.Order, key: pendingKey{at: j.At, flow: j.Flow, run: j.Run}}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
