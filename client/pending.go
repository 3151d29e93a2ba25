package client

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/interlockhq/interlock/protocol"
	"github.com/nats-io/nats.go"
)

// Limits of [PendingQuery].
const (
	// DefaultPendingLimit is the page size when PendingQuery.Limit is 0.
	DefaultPendingLimit = 50
	// MaxPendingLimit is the largest page ListPending returns.
	MaxPendingLimit = 1000
)

// scanBatch is how many entries a filtered scan reads per request: a
// page of approvals among many questions takes a few requests, not one
// per entry.
const scanBatch = 256

// PendingQuery selects a page of the runs waiting on an interrupt.
type PendingQuery struct {
	// Flow, if set, keeps only that flow's runs. The server filters by key
	// subject, so a flow's page costs the same however many runs other
	// flows have waiting; the page's total counts the flow's entries, in
	// proportion to the runs the flow has waiting.
	Flow string
	// Kinds, if set, keeps only interrupts of these kinds (question,
	// choice, approval).
	Kinds []string
	// Roles, if set, keeps only approvals for these approver roles.
	Roles []string
	// Newest lists the most recently asked first; the default is oldest
	// first. The server answers it by walking the index's whole subject
	// list (the last entry of every key), in proportion to what waits:
	// about 0.1 s at a million waiting runs.
	Newest bool
	// Limit is the most items a page holds, 1 to MaxPendingLimit. Defaults
	// to DefaultPendingLimit.
	Limit int
	// After is the Next of the previous page, of a query in the same
	// order; "" starts at the oldest (or the newest).
	After string
}

// filtered reports whether the query filters on what only an entry's
// value holds.
func (q PendingQuery) filtered() bool { return len(q.Kinds) > 0 || len(q.Roles) > 0 }

// match reports whether p passes the query's kind and role filters.
func (q PendingQuery) match(p *protocol.Pending) bool {
	return (len(q.Kinds) == 0 || slices.Contains(q.Kinds, p.Kind)) &&
		(len(q.Roles) == 0 || slices.Contains(q.Roles, p.ApproverRole))
}

// PendingPage is one page of waiting runs.
type PendingPage struct {
	// Items are the waiting runs, ordered by when their interrupt was
	// asked (a re-ask, such as a partial answer or an escalation, counts
	// as a new ask): oldest first, or newest first.
	Items []protocol.Pending `json:"items"`
	// Next is the cursor of the following page, "" on the last page. It
	// is opaque: pass it back as PendingQuery.After.
	Next string `json:"next,omitempty"`
	// Total is how many runs of the query's flow wait, read from the
	// stream's own count, before the kind and role filters (which only
	// the entries' values can tell). It also counts runs resumed within
	// the last marker TTL (bus.StreamConfig.MarkerTTL, 30s by default)
	// whose markers are still in the index; it is exact when one page
	// holds every waiting run of an unfiltered query.
	Total uint64 `json:"total"`
}

// ListPending returns a page of the runs waiting on an interrupt, read
// from the pending index with batched direct gets that hand back the
// current entries of <prefix>_pending matching the flow, in stream order
// (the order in which they were asked), from the cursor on, forwards or
// backwards. The cost of a page does not grow with the number of waiting
// runs; with kind or role filters it grows with the entries read to fill
// the page.
func (c *Client) ListPending(ctx context.Context, q PendingQuery) (PendingPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultPendingLimit
	}
	if q.Limit < 1 || q.Limit > MaxPendingLimit {
		return PendingPage{}, fmt.Errorf("client: PendingQuery.Limit %d is out of range: use 1 to %d", q.Limit, MaxPendingLimit)
	}
	for _, k := range q.Kinds {
		if _, ok := protocol.SpecOf(k); !ok {
			return PendingPage{}, fmt.Errorf("client: PendingQuery.Kinds: %q is not a kind: use %s", k, protocol.KindsText())
		}
	}
	for _, r := range q.Roles {
		if err := CheckName("role", r); err != nil {
			return PendingPage{}, err
		}
	}
	filter := "" // every key: the server counts and steps without matching subjects
	if q.Flow != "" {
		if err := CheckName("flow", q.Flow); err != nil {
			return PendingPage{}, err
		}
		filter = "$KV." + c.names.PendingBucket() + "." + q.Flow + ".*"
	}
	cur, err := parseCursor(q.After)
	if err != nil {
		return PendingPage{}, err
	}
	if q.After != "" && cur.newest != q.Newest {
		return PendingPage{}, fmt.Errorf("client: the cursor is of a page in %s-first order, and the query asks for %s first: keep the order while paging%w", orderName(cur.newest), orderName(q.Newest), ErrCursor)
	}
	g := directGet{
		nc: c.nc, subject: "$JS.API.DIRECT.GET.KV_" + c.names.PendingBucket(), filter: filter,
		what: "bucket " + c.names.PendingBucket(), every: "$KV." + c.names.PendingBucket() + ".>",
	}

	var s pendingScan
	if q.Newest {
		s, err = g.scanBackward(ctx, q, cur.seq)
	} else {
		s, err = g.scanForward(ctx, q, cur.seq)
	}
	if err != nil {
		return PendingPage{}, err
	}
	page := PendingPage{Items: s.items}
	if page.Items == nil {
		page.Items = []protocol.Pending{} // [] in JSON, not null
	}
	if len(page.Items) > q.Limit {
		page.Items = page.Items[:q.Limit]
		page.Next = cursor{seq: s.seqs[q.Limit-1], newest: q.Newest}.String()
	}
	total, markers := s.total, s.markers
	if !s.counted {
		if total, err = g.count(ctx); err != nil {
			return PendingPage{}, err
		}
	}
	switch {
	case q.After == "" && page.Next == "" && !q.filtered():
		total = uint64(len(page.Items)) // the page read every entry
	case total >= markers:
		total -= markers
	}
	page.Total = max(total, uint64(len(page.Items)))
	if q.filtered() && page.Total < uint64(len(page.Items)) {
		page.Total = uint64(len(page.Items))
	}
	return page, nil
}

// pendingScan is what a scan of the pending index read: up to one more
// item than the page holds (which tells whether a next page exists), and
// each item's stream sequence.
type pendingScan struct {
	items []protocol.Pending
	seqs  []uint64
	// total counts the entries matching the flow in the whole index, when
	// counted is set; markers counts the markers a forward scan from the
	// start skipped (they are in total).
	total   uint64
	counted bool
	markers uint64
}

// add keeps m if it is an entry that matches q.
func (s *pendingScan) add(q PendingQuery, m batchMsg) error {
	if m.marker {
		s.markers++
		return nil
	}
	var p protocol.Pending
	if err := json.Unmarshal(m.data, &p); err != nil {
		return fmt.Errorf("client: pending entry %s is not a pending document: %w", m.subject, err)
	}
	if q.match(&p) {
		s.items = append(s.items, p)
		s.seqs = append(s.seqs, m.seq)
	}
	return nil
}

// scanForward reads entries after sequence after, oldest first, until it
// holds one more item than the page.
func (g directGet) scanForward(ctx context.Context, q PendingQuery, after uint64) (pendingScan, error) {
	var s pendingScan
	start := after + 1
	for len(s.items) <= q.Limit {
		n := q.Limit + 1 - len(s.items)
		if q.filtered() {
			n = max(n, scanBatch)
		}
		b, err := g.batch(ctx, start, n)
		if err != nil {
			return s, err
		}
		if !s.counted && after == 0 {
			s.total, s.counted = b.matching, true
		}
		for _, m := range b.msgs {
			if err := s.add(q, m); err != nil {
				return s, err
			}
		}
		if len(b.msgs) == 0 || b.pending == 0 {
			break
		}
		start = b.msgs[len(b.msgs)-1].seq + 1
	}
	return s, nil
}

// scanBackward reads entries before sequence before (0: from the newest),
// newest first, until it holds one more item than the page. JetStream
// reads forwards only, so it reads windows of sequences backwards from
// the end, each twice as wide as the one before, forwards within each:
// a page costs a few requests however sparse the sequences.
func (g directGet) scanBackward(ctx context.Context, q PendingQuery, before uint64) (pendingScan, error) {
	var s pendingScan
	hi := before - 1
	if before == 0 {
		last, ok, err := g.last(ctx)
		if err != nil || !ok {
			return s, err
		}
		hi = last
	}
	width := uint64(2 * (q.Limit + 1))
	for hi > 0 && len(s.items) <= q.Limit {
		lo := uint64(1)
		if hi > width {
			lo = hi - width + 1
		}
		var window pendingScan
	window:
		for start := lo; start <= hi; {
			// A batch reads on past hi (the server takes no upper bound
			// for it): ask for no more than the window can hold.
			b, err := g.batch(ctx, start, int(min(hi-start+1, MaxPendingLimit)))
			if err != nil {
				return s, err
			}
			for _, m := range b.msgs {
				if m.seq > hi {
					break window
				}
				if err := window.add(q, m); err != nil {
					return s, err
				}
			}
			if len(b.msgs) == 0 || b.pending == 0 {
				break
			}
			start = b.msgs[len(b.msgs)-1].seq + 1
		}
		slices.Reverse(window.items)
		slices.Reverse(window.seqs)
		s.items = append(s.items, window.items...)
		s.seqs = append(s.seqs, window.seqs...)
		s.markers += window.markers
		hi = lo - 1
		width *= 2
	}
	if len(s.items) > q.Limit+1 {
		s.items, s.seqs = s.items[:q.Limit+1], s.seqs[:q.Limit+1]
	}
	return s, nil
}

func orderName(newest bool) string {
	if newest {
		return "newest"
	}
	return "oldest"
}

// ErrCursor is the error of a PendingQuery.After that is not a cursor of
// a page in the query's order. Its message is empty: it only marks the
// error that wraps it.
var ErrCursor = errCursor{}

type errCursor struct{}

func (errCursor) Error() string { return "" }

// Cursor encodings: the stream sequence of the last item of a page, and
// for a page newest first, the order.
const (
	cursorPrefix       = "p1:"
	cursorNewestPrefix = "p1n:"
)

// cursor is where a page of ListPending ended.
type cursor struct {
	seq    uint64
	newest bool
}

// String encodes the cursor.
func (c cursor) String() string {
	prefix := cursorPrefix
	if c.newest {
		prefix = cursorNewestPrefix
	}
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + strconv.FormatUint(c.seq, 10)))
}

// parseCursor decodes a cursor, "" as the zero cursor.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		for _, p := range []string{cursorPrefix, cursorNewestPrefix} {
			if rest, ok := strings.CutPrefix(string(b), p); ok {
				if seq, err := strconv.ParseUint(rest, 10, 64); err == nil && seq > 0 {
					return cursor{seq: seq, newest: p == cursorNewestPrefix}, nil
				}
			}
		}
	}
	return cursor{}, fmt.Errorf("client: %q is not a pending-list cursor: pass the Next of a previous page, or \"\" for the first%w", s, ErrCursor)
}

// directGet reads a stream (a KV bucket's, or the audit stream) with
// JetStream's batched direct get (nats-server 2.11+), which needs no
// consumer.
type directGet struct {
	nc      *nats.Conn
	subject string // $JS.API.DIRECT.GET.<stream>
	filter  string // "" for every message
	what    string // "bucket interlock_pending", for errors
	// every is the filter of every message of the stream, for last.
	every string
	// keyed makes lastMsg name filter, a subject, in the request's
	// subject ($JS.API.DIRECT.GET.<stream>.<subject>, no body): the form
	// a user may be allowed for one key and no other.
	keyed bool
}

// batchMsg is one message of a batch.
type batchMsg struct {
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
	marker  bool
}

// batchResult is what one batched request returned.
type batchResult struct {
	msgs []batchMsg
	// matching counts the messages matching the filter from the start
	// sequence on, as the server counted them when the batch began.
	matching uint64
	// pending counts those after the last message returned.
	pending uint64
}

// batch returns up to n messages matching the filter from sequence start on.
func (g directGet) batch(ctx context.Context, start uint64, n int) (batchResult, error) {
	req, err := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextBy  string `json:"next_by_subj,omitempty"`
		Batch   int    `json:"batch"`
		MaxByte int    `json:"max_bytes,omitempty"`
	}{Seq: start, NextBy: g.filter, Batch: n})
	if err != nil {
		return batchResult{}, err
	}
	return g.request(ctx, req, n)
}

// request sends a batched direct get of up to n messages and gathers its
// replies.
func (g directGet) request(ctx context.Context, req []byte, n int) (batchResult, error) {
	// An inbox of its own, outside the connection's request inbox: a
	// reply to a subject under that one would reach its wildcard
	// subscription too, and the server would send every message of the
	// batch twice. Its channel has room for the whole answer (n messages
	// and the status that ends it), so none is dropped however late it is
	// read: SubscribeSync would allocate nats.DefaultMaxChanLen (65536)
	// slots, 512 KB, on every read.
	inbox := g.nc.NewInbox()
	ch := make(chan *nats.Msg, n+1)
	sub, err := g.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return batchResult{}, fmt.Errorf("client: subscribing for a batched read: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := g.nc.PublishRequest(g.subject, inbox, req); err != nil {
		return batchResult{}, fmt.Errorf("client: reading %s: %w", g.what, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	var out batchResult
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
			if m == nil {
				return batchResult{}, fmt.Errorf("client: reading %s: %w", g.what, nats.ErrConnectionClosed)
			}
		case <-ctx.Done():
			return batchResult{}, fmt.Errorf("client: reading %s: %w (is it provisioned, on nats-server 2.11 or later?)", g.what, ctx.Err())
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			out.pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, nil
		case "404": // nothing matches from start on
			return out, nil
		case "503":
			return batchResult{}, fmt.Errorf("client: reading %s: %w", g.what, nats.ErrNoResponders)
		default:
			return batchResult{}, fmt.Errorf("client: reading %s: the server answered %s %s", g.what, status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return batchResult{}, fmt.Errorf("client: reading %s: a message without a sequence: %w", g.what, err)
		}
		if len(out.msgs) == 0 {
			left, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			out.matching = left + 1
		}
		if s := m.Header.Get("Nats-Stream"); s != "" && "$JS.API.DIRECT.GET."+s != g.subject {
			return batchResult{}, fmt.Errorf("client: reading %s: a reply from stream %s", g.what, s)
		}
		out.msgs = append(out.msgs, batchMsg{
			subject: m.Header.Get("Nats-Subject"),
			seq:     seq,
			header:  m.Header,
			data:    m.Data,
			marker:  m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "",
		})
	}
}

// count returns how many messages match the filter in the whole stream.
func (g directGet) count(ctx context.Context) (uint64, error) {
	b, err := g.batch(ctx, 1, 1)
	if err != nil {
		return 0, err
	}
	return b.matching, nil
}

// last returns the sequence of the last message matching the filter; ok
// is false when none does.
func (g directGet) last(ctx context.Context) (seq uint64, ok bool, err error) {
	m, err := g.lastMsg(ctx)
	if err != nil || m == nil {
		return 0, false, err
	}
	return m.seq, true, nil
}

// lastMsg returns the last message matching the filter, or nil when none
// does.
func (g directGet) lastMsg(ctx context.Context) (*batchMsg, error) {
	req, err := json.Marshal(struct {
		LastBy string `json:"last_by_subj"`
	}{LastBy: cmp.Or(g.filter, g.every)})
	if err != nil {
		return nil, err
	}
	subject := g.subject
	if g.keyed {
		subject, req = g.subject+"."+g.filter, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	m, err := g.nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return nil, fmt.Errorf("client: reading %s: %w", g.what, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("client: reading %s: the server answered %s %s", g.what, status, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("client: reading %s: a message without a sequence: %w", g.what, err)
	}
	if s := m.Header.Get("Nats-Stream"); s != "" && "$JS.API.DIRECT.GET."+s != g.subject {
		return nil, fmt.Errorf("client: reading %s: a reply from stream %s", g.what, s)
	}
	return &batchMsg{
		subject: m.Header.Get("Nats-Subject"),
		seq:     seq,
		header:  m.Header,
		data:    m.Data,
		marker:  m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "",
	}, nil
}
