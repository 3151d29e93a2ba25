package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/events"
)

// Limits of [PendingQuery].
const (
	// DefaultPendingLimit is the page size when PendingQuery.Limit is 0.
	DefaultPendingLimit = 50
	// MaxPendingLimit is the largest page ListPending returns.
	MaxPendingLimit = 1000
)

// PendingQuery selects a page of the runs waiting on an interrupt.
type PendingQuery struct {
	// Flow, if set, keeps only that flow's runs. The server filters by key
	// subject, so a flow's page costs the same however many runs other
	// flows have waiting.
	Flow string
	// Limit is the most items a page holds, 1 to MaxPendingLimit. Defaults
	// to DefaultPendingLimit.
	Limit int
	// After is the Next of the previous page; "" starts at the oldest.
	After string
}

// PendingPage is one page of waiting runs.
type PendingPage struct {
	// Items are the waiting runs, oldest first by when their interrupt
	// was asked (a re-ask, such as a partial answer, counts as a new ask).
	Items []events.Pending `json:"items"`
	// Next is the cursor of the following page, "" on the last page. It
	// is opaque: pass it back as PendingQuery.After.
	Next string `json:"next,omitempty"`
	// Total is how many runs of the query's flow wait, read from the
	// stream's own count. It also counts runs resumed within the last
	// marker TTL (bus.StreamConfig.MarkerTTL, 30s by default) whose
	// markers are still in the index; it is exact when one page holds
	// every waiting run.
	Total uint64 `json:"total"`
}

// ListPending returns a page of the runs waiting on an interrupt, read
// from the pending index in one pass: a batched direct get that hands back
// the current entries of <prefix>_pending matching the flow, in stream
// order, from the cursor on. The cost of a page does not grow with the
// number of waiting runs.
func (c *Client) ListPending(ctx context.Context, q PendingQuery) (PendingPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultPendingLimit
	}
	if q.Limit < 1 || q.Limit > MaxPendingLimit {
		return PendingPage{}, fmt.Errorf("client: PendingQuery.Limit %d is out of range: use 1 to %d", q.Limit, MaxPendingLimit)
	}
	filter := "" // every key: the server counts and steps without matching subjects
	if q.Flow != "" {
		if err := CheckName("flow", q.Flow); err != nil {
			return PendingPage{}, err
		}
		filter = "$KV." + c.names.PendingBucket() + "." + q.Flow + ".*"
	}
	after, err := parseCursor(q.After)
	if err != nil {
		return PendingPage{}, err
	}
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET.KV_" + c.names.PendingBucket(), filter: filter, what: "bucket " + c.names.PendingBucket()}

	page := PendingPage{Items: []events.Pending{}}
	var (
		markers uint64
		lastSeq []uint64 // sequence of each item
		total   uint64
		counted bool
		start   = after + 1
	)
	// One more item than the page holds tells whether a next page exists.
	for len(page.Items) <= q.Limit {
		b, err := g.batch(ctx, start, q.Limit+1-len(page.Items))
		if err != nil {
			return PendingPage{}, err
		}
		if !counted && after == 0 {
			total, counted = b.matching, true
		}
		for _, m := range b.msgs {
			if m.marker {
				markers++
				continue
			}
			var p events.Pending
			if err := json.Unmarshal(m.data, &p); err != nil {
				return PendingPage{}, fmt.Errorf("client: pending entry %s is not a pending document: %w", m.subject, err)
			}
			page.Items = append(page.Items, p)
			lastSeq = append(lastSeq, m.seq)
		}
		if len(b.msgs) == 0 || b.pending == 0 {
			break
		}
		start = b.msgs[len(b.msgs)-1].seq + 1
	}
	if len(page.Items) > q.Limit {
		page.Items = page.Items[:q.Limit]
		page.Next = formatCursor(lastSeq[q.Limit-1])
	}
	if !counted {
		if total, err = g.count(ctx); err != nil {
			return PendingPage{}, err
		}
	}
	switch {
	case after == 0 && page.Next == "":
		total = uint64(len(page.Items)) // the page read every entry
	case total >= markers:
		total -= markers
	}
	page.Total = max(total, uint64(len(page.Items)))
	return page, nil
}

// cursorPrefix versions the cursor's encoding.
const cursorPrefix = "p1:"

// formatCursor encodes the stream sequence of the last item of a page.
func formatCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(seq, 10)))
}

// parseCursor decodes a cursor, "" as 0.
func parseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), cursorPrefix); ok {
			if seq, err := strconv.ParseUint(rest, 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	return 0, fmt.Errorf("client: %q is not a pending-list cursor: pass the Next of a previous page, or \"\" for the first", s)
}

// directGet reads a stream (a KV bucket's, or the audit stream) with
// JetStream's batched direct get (nats-server 2.11+), which needs no
// consumer.
type directGet struct {
	nc      *nats.Conn
	subject string // $JS.API.DIRECT.GET.<stream>
	filter  string // "" for every message
	what    string // "bucket interlock_pending", for errors
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
	inbox := g.nc.NewRespInbox()
	sub, err := g.nc.SubscribeSync(inbox)
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
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return batchResult{}, fmt.Errorf("client: reading %s: %w (is it provisioned, on nats-server 2.11 or later?)", g.what, err)
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
