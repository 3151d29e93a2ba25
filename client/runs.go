package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Limits of [RunsQuery].
const (
	// DefaultRunsLimit is the page size when RunsQuery.Limit is 0.
	DefaultRunsLimit = 50
	// MaxRunsLimit is the largest page ListRuns returns.
	MaxRunsLimit = 1000
)

// Statuses of [RunsQuery] beside the finished ones (wire.FinishedStatuses).
const (
	// StatusWaiting: runs waiting on an interrupt, from the pending index.
	StatusWaiting = string(protocol.StatusWaiting)
	// StatusFinished stands for every finished status: completed, failed,
	// cancelled and expired.
	StatusFinished = "finished"
	// StatusRunning is not listed: a run is running only while a worker is
	// inside a transition (a step recorded, its node not finished), and no
	// index holds it then. ListRuns refuses it, saying so.
	StatusRunning = "running"
)

// RunsStatuses are the statuses ListRuns lists, in the order a page's
// Statuses name them.
func RunsStatuses() []string { return append([]string{StatusWaiting}, wire.FinishedStatuses...) }

// RunsQuery selects a page of runs.
type RunsQuery struct {
	// Flow, if set, keeps only that flow's runs. The server filters by
	// subject: a flow's page costs the entries of that flow read, and the
	// server steps over other flows' entries of the same status to find
	// them.
	Flow string
	// Statuses, if set, keeps only runs of these statuses: waiting,
	// completed, failed, cancelled, expired, or finished for the last
	// four. Each status is an index of its own (the pending index, or the
	// finished-runs stream of the status), so a status filter never reads
	// runs of another. Defaults to every one of them. Running is refused:
	// see StatusRunning.
	Statuses []string
	// Limit is the most items a page holds, 1 to MaxRunsLimit. Defaults to
	// DefaultRunsLimit.
	Limit int
	// After is the Next of the previous page of the same query; "" starts
	// at the newest.
	After string
}

// RunItem is a run in a list of runs: where it stands, and the index
// entry it was listed from.
type RunItem struct {
	Flow   string `json:"flow"`
	Run    string `json:"run"`
	Status string `json:"status"`
	// Node is the node the run waits at, or ended at.
	Node string `json:"node,omitempty"`
	// Checkpoint is the run's checkpoint number when it was indexed: when
	// its interrupt was last asked, or when it finished.
	Checkpoint uint64 `json:"checkpoint"`
	// ChangedAt is when the run last changed, as the server recorded its
	// index entry: when its pending entry was last written (an interrupt
	// asked, asked again, claimed, voted on), or when it finished. Pages
	// are ordered by it, newest first.
	ChangedAt time.Time `json:"changedAt"`
	// Pending is the pending index entry of a waiting run.
	Pending *protocol.Pending `json:"pending,omitempty"`
	// Finished is the finished-runs index entry of a finished run.
	Finished *protocol.Finished `json:"finished,omitempty"`
}

// RunsPage is one page of runs.
type RunsPage struct {
	// Items are the runs, newest first by ChangedAt.
	Items []RunItem `json:"items"`
	// Next is the cursor of the following page, "" on the last page. It
	// is opaque: pass it back as RunsQuery.After, with the same query.
	Next string `json:"next,omitempty"`
	// Statuses are the statuses the page lists: the query's, or every
	// status ListRuns lists. Runs running (see StatusRunning) are never
	// among them.
	Statuses []string `json:"statuses"`
}

// ListRuns returns a page of runs of every status the query names, newest
// first by when they last changed. Waiting runs come from the pending
// index, finished runs from the finished-runs index (one stream per
// status, each entry removed with its run's checkpoint after
// --keep-finished). It reads each index backwards by sequence with
// batched direct gets, from the cursor on, and merges them by the time
// the server stored each entry: a page reads about Limit entries of each
// status listed, however many runs are stored. The list is live: a run
// that changes between two pages moves to the newest end, and is not on
// a later page. A page of several statuses may hold fewer than Limit
// items, or none, and still have a Next: it ends where the read of the
// pending index stopped among the markers of runs that stopped waiting.
//
// A status that runs are not listed by (running among them) is an error
// wrapping ErrStatus; an After that is not a cursor of the query, one
// wrapping ErrCursor.
func (c *Client) ListRuns(ctx context.Context, q RunsQuery) (RunsPage, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if q.Limit == 0 {
		q.Limit = DefaultRunsLimit
	}
	if q.Limit < 1 || q.Limit > MaxRunsLimit {
		return RunsPage{}, fmt.Errorf("client: RunsQuery.Limit %d is out of range: use 1 to %d", q.Limit, MaxRunsLimit)
	}
	if q.Flow != "" {
		if err := CheckName("flow", q.Flow); err != nil {
			return RunsPage{}, err
		}
	}
	statuses, err := runsStatuses(q.Statuses)
	if err != nil {
		return RunsPage{}, err
	}
	cur, err := parseRunsCursor(q.After, statuses)
	if err != nil {
		return RunsPage{}, err
	}
	sources := make([]*runSource, len(statuses))
	for i, status := range statuses {
		sources[i] = c.runSource(status, q.Flow)
	}
	// Each index is read apart, at the same time: up to one more entry
	// than the page holds, which tells whether a next page exists. When
	// several are merged, each reads at most a few pages' worth of
	// messages: the pending index holds, besides what waits, a marker of
	// every run that stopped waiting within its marker TTL, all of them
	// at its newest end. A read that stops there says how far back in
	// time it got, and the page ends there (see mergeRuns).
	budget := 0
	if len(sources) > 1 {
		budget = scanPages * (q.Limit + 1)
	}
	reads := make([]sourceRead, len(sources))
	var wg sync.WaitGroup
	for i, s := range sources {
		wg.Go(func() { reads[i] = s.back(ctx, cur[i], q.Limit+1, budget) })
	}
	wg.Wait()
	for _, r := range reads {
		if r.err != nil {
			return RunsPage{}, r.err
		}
	}
	return mergeRuns(reads, statuses, q.Limit), nil
}

// runsStatuses checks a query's statuses and returns them in the order of
// RunsStatuses, each once.
func runsStatuses(asked []string) ([]string, error) {
	if len(asked) == 0 {
		return RunsStatuses(), nil
	}
	want := map[string]bool{}
	for _, s := range asked {
		switch {
		case s == StatusFinished:
			for _, f := range wire.FinishedStatuses {
				want[f] = true
			}
		case s == StatusRunning:
			return nil, fmt.Errorf("client: runs are not listed while running: a run is running only while a worker is inside a transition (a step recorded, its node not finished), and no index holds it then; read the run itself (Checkpoint), or list %s%w", strings.Join(RunsStatuses(), ", "), ErrStatus)
		case slices.Contains(RunsStatuses(), s):
			want[s] = true
		default:
			return nil, fmt.Errorf("client: RunsQuery.Statuses: %q is not a status runs are listed by: use %s, or %s for the last four%w", s, strings.Join(RunsStatuses(), ", "), StatusFinished, ErrStatus)
		}
	}
	var out []string
	for _, s := range RunsStatuses() {
		if want[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// ErrStatus marks the error of a RunsQuery status that is not one runs
// are listed by. Its message is empty: it only marks the error that wraps
// it.
var ErrStatus = errStatus{}

type errStatus struct{}

func (errStatus) Error() string { return "" }

// runsCursorPrefix starts an encoded runs cursor.
const runsCursorPrefix = "r1"

// runsCursor is where a page of ListRuns ended in each index it read: the
// sequence below which the next page reads, 0 for the newest end, 1 for
// an index read to its oldest entry.
type runsCursor []uint64

// encodeRunsCursor encodes the positions of the indexes of statuses.
func encodeRunsCursor(statuses []string, pos []uint64) string {
	parts := []string{runsCursorPrefix}
	for i, s := range statuses {
		parts = append(parts, s+"="+strconv.FormatUint(pos[i], 10))
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, ";")))
}

// parseRunsCursor decodes a cursor of a query of statuses; "" is the
// newest end of every index.
func parseRunsCursor(s string, statuses []string) (runsCursor, error) {
	cur := make(runsCursor, len(statuses))
	if s == "" {
		return cur, nil
	}
	bad := fmt.Errorf("client: %q is not a cursor of a list of runs: pass the Next of a previous page, or \"\" for the first%w", s, ErrCursor)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.Split(string(b), ";")
	if parts[0] != runsCursorPrefix {
		return nil, bad
	}
	var named []string
	for _, p := range parts[1:] {
		status, seq, ok := strings.Cut(p, "=")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || err != nil {
			return nil, bad
		}
		i := slices.Index(statuses, status)
		if i >= 0 {
			cur[i] = n
		}
		named = append(named, status)
	}
	if !slices.Equal(named, statuses) {
		return nil, fmt.Errorf("client: the cursor is of a list of runs of the statuses %s, and the query asks for %s: keep the statuses while paging%w",
			strings.Join(named, ", "), strings.Join(statuses, ", "), ErrCursor)
	}
	return cur, nil
}

// runSource is the index of one status: the pending index for waiting
// runs, the finished-runs stream of a finished status.
type runSource struct {
	c      *Client
	status string
	get    directGet
	stream string
	// filtered is set when the source reads one flow's entries.
	filtered bool
}

func (c *Client) runSource(status, flow string) *runSource {
	s := &runSource{c: c, status: status, filtered: flow != ""}
	if status == StatusWaiting {
		bucket := c.names.PendingBucket()
		s.stream = "KV_" + bucket
		s.get = directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + s.stream, what: "bucket " + bucket}
		if flow != "" {
			s.get.filter = "$KV." + bucket + "." + flow + ".*"
		}
		return s
	}
	s.stream = c.names.FinishedStream(status)
	s.get = directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + s.stream, what: "stream " + s.stream}
	if flow != "" {
		s.get.filter = c.names.Finished(status, flow)
	}
	return s
}

// sourced is an item of a source with its sequence in the source's
// stream and the time the server stored it.
type sourced struct {
	item RunItem
	seq  uint64
}

// scanPages bounds what an index merged with others reads for a page, in
// pages' worth of messages, markers included.
const scanPages = 4

// sourceRead is what a source returned for a page.
type sourceRead struct {
	// items are newest first.
	items []sourced
	// from is where the read began (the cursor's position, or one past
	// the newest sequence when it began at the newest end).
	from uint64
	// oldest is set when items reach the oldest entry of the source.
	oldest bool
	// cut is set when the read stopped at its budget with fewer items
	// than asked for: it read every message from low up to from, the
	// oldest of them stored at lowTime, and none below.
	cut     bool
	low     uint64
	lowTime time.Time
	err     error
}

// streamBounds reads a stream's first and last sequences and how many
// messages it holds, with one stream info request, which every client
// that may read the stream may send.
func (s *runSource) streamBounds(ctx context.Context) (first, last, msgs uint64, err error) {
	m, err := s.c.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+s.stream, nil)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("client: reading the state of %s: %w", s.get.what, err)
	}
	var info struct {
		State struct {
			Msgs     uint64 `json:"messages"`
			FirstSeq uint64 `json:"first_seq"`
			LastSeq  uint64 `json:"last_seq"`
		} `json:"state"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return 0, 0, 0, fmt.Errorf("client: reading the state of %s: %w", s.get.what, err)
	}
	if info.Error != nil {
		return 0, 0, 0, fmt.Errorf("client: reading the state of %s: %s (has `interlock serve` of this version run once, with the same --prefix?)", s.get.what, info.Error.Description)
	}
	return info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, nil
}

// back reads up to n entries of the source below sequence before (0: from
// the newest), newest first. JetStream reads forwards only, so it reads
// windows of sequences backwards from the start, each twice as wide as
// the one before, forwards within each; a window's matching entries are
// counted before they are read (the server counts them from its index),
// so that a read never runs on into entries already read. With a budget
// (0: none), it stops once it has read that many messages, markers
// included, and says how far it got.
func (s *runSource) back(ctx context.Context, before uint64, n, budget int) sourceRead {
	first, last, msgs, err := s.streamBounds(ctx)
	if err != nil {
		return sourceRead{err: err}
	}
	r := sourceRead{from: before}
	if before == 0 {
		r.from = last + 1
	}
	if msgs == 0 || r.from <= first {
		r.oldest = true
		return r
	}
	hi := min(r.from-1, last)
	// above counts the entries matching the filter after hi, -1 when not
	// known yet. At the newest end nothing is after hi but what was
	// stored since the stream's state was read.
	above := int64(-1)
	if before == 0 {
		above = 0
		if s.filtered && s.status != StatusWaiting {
			// A flow's newest finished entry is one lookup of the
			// server's subject index away (the subject is the flow's
			// alone), however many entries of other flows follow it.
			seq, ok, err := s.get.last(ctx)
			if err != nil {
				return sourceRead{err: err}
			}
			if !ok || seq < first {
				r.oldest = true
				return r
			}
			hi = min(hi, seq)
		}
	}
	// With a budget, two windows at most: a page, then the rest of the
	// budget, each read with one request (every request costs the server
	// a count, which on the pending index walks its subjects).
	width, windows := uint64(n), 0
	for len(r.items) < n {
		if budget > 0 {
			if windows == 2 || budget <= n {
				r.cut = true
				break
			}
			if windows == 1 {
				width = uint64(budget - n)
			}
		}
		windows++
		lo := first
		if hi-first+1 > width {
			lo = hi - width + 1
		}
		win, count, err := s.window(ctx, lo, hi, above)
		if err != nil {
			return sourceRead{err: err}
		}
		above = count // what follows the next window's hi: this one's lo on
		if len(win) > 0 {
			if r.lowTime, err = s.storedAt(win[0]); err != nil {
				return sourceRead{err: err}
			}
		}
		r.low = lo
		for i := len(win) - 1; i >= 0; i-- {
			if it, ok, err := s.decode(win[i]); err != nil {
				return sourceRead{err: err}
			} else if ok {
				r.items = append(r.items, sourced{item: it, seq: win[i].seq})
			}
		}
		if lo == first {
			r.oldest = true
			break
		}
		hi, width = lo-1, 2*width
	}
	return r
}

// storedAt is when the server stored a message.
func (s *runSource) storedAt(m batchMsg) (time.Time, error) {
	at, err := time.Parse(time.RFC3339Nano, m.header.Get("Nats-Time-Stamp"))
	if err != nil {
		return time.Time{}, fmt.Errorf("client: reading %s: message %d has no time: %w", s.get.what, m.seq, err)
	}
	return at, nil
}

// maxBatch bounds the messages one batched direct get asks for.
const maxBatch = MaxRunsLimit

// window reads the messages of [lo, hi] matching the source's filter,
// forwards. above is how many matching messages follow hi (-1 if not
// known). It returns the messages and how many matching messages there
// are from lo on, for the window below (-1 if not known).
//
// Without a filter a window holds at most as many messages as it spans,
// and it is read with one request for all of them; a read runs on past
// hi only by the sequences deleted in the window. With a filter its
// messages may be sparse, and a request for as many would run on into
// the entries already read: the matching messages after hi and from lo
// are counted first (the server counts them from its index), and the
// window is read for exactly its own.
func (s *runSource) window(ctx context.Context, lo, hi uint64, above int64) ([]batchMsg, int64, error) {
	if s.filtered && above < 0 {
		b, err := s.get.batch(ctx, hi+1, 1)
		if err != nil {
			return nil, 0, err
		}
		above = int64(b.matching)
	}
	k := int(min(hi-lo+1, maxBatch))
	if s.filtered && above > 0 {
		k = 1 // its count says how many the window holds
	}
	var out []batchMsg
	start, left, counted := lo, int64(-1), int64(-1)
	for start <= hi {
		b, err := s.get.batch(ctx, start, k)
		if err != nil {
			return nil, 0, err
		}
		if counted < 0 {
			counted = int64(b.matching)
			if above >= 0 {
				left = counted - above
			}
		}
		for _, m := range b.msgs {
			if m.seq > hi {
				return out, counted, nil
			}
			out = append(out, m)
			left--
		}
		if len(b.msgs) == 0 || b.pending == 0 || above >= 0 && left <= 0 {
			break
		}
		start = b.msgs[len(b.msgs)-1].seq + 1
		k = int(min(int64(hi-start+1), maxBatch))
		if above >= 0 {
			k = int(min(int64(k), left))
		}
	}
	return out, counted, nil
}

// decode reads an index entry as a run; ok is false for a marker.
func (s *runSource) decode(m batchMsg) (RunItem, bool, error) {
	if m.marker {
		return RunItem{}, false, nil
	}
	at, err := s.storedAt(m)
	if err != nil {
		return RunItem{}, false, err
	}
	if s.status == StatusWaiting {
		var p protocol.Pending
		if err := json.Unmarshal(m.data, &p); err != nil {
			return RunItem{}, false, fmt.Errorf("client: pending entry %s is not a pending document: %w", m.subject, err)
		}
		return RunItem{Flow: p.Flow, Run: p.Run, Status: StatusWaiting, Node: p.Node, Checkpoint: p.Checkpoint, ChangedAt: at, Pending: &p}, true, nil
	}
	var f protocol.Finished
	if err := json.Unmarshal(m.data, &f); err != nil {
		return RunItem{}, false, fmt.Errorf("client: finished-runs index entry %d of %s is not a finished entry: %w", m.seq, s.stream, err)
	}
	if string(f.Status) != s.status {
		return RunItem{}, false, fmt.Errorf("client: finished-runs index entry %d of %s is of a run %s, not %s", m.seq, s.stream, f.Status, s.status)
	}
	return RunItem{Flow: f.Flow, Run: f.Run, Status: string(f.Status), Node: f.Node, Checkpoint: f.Checkpoint, ChangedAt: at, Finished: &f}, true, nil
}

// mergeRuns merges the sources' items, newest first, into a page of up to
// limit items and the cursor of the next page. A source whose read was cut
// knows nothing of its entries stored before the oldest message it read:
// the page holds only what changed since, and the next page carries on
// below what each source read.
func mergeRuns(reads []sourceRead, statuses []string, limit int) RunsPage {
	page := RunsPage{Items: []RunItem{}, Statuses: statuses}
	pos := make([]uint64, len(reads))
	next := make([]int, len(reads)) // the index of each source's next item
	var horizon time.Time
	for i, r := range reads {
		pos[i] = r.from
		if r.cut && r.lowTime.After(horizon) {
			horizon = r.lowTime
		}
	}
	type key struct {
		flow, run  string
		checkpoint uint64
	}
	seen := map[key]bool{}
	for len(page.Items) < limit {
		best := -1
		for i, r := range reads {
			if next[i] == len(r.items) {
				continue
			}
			if best < 0 || r.items[next[i]].item.ChangedAt.After(reads[best].items[next[best]].item.ChangedAt) {
				best = i
			}
		}
		if best < 0 || reads[best].items[next[best]].item.ChangedAt.Before(horizon) {
			break
		}
		it := reads[best].items[next[best]]
		next[best]++
		pos[best] = it.seq
		// A finished entry written again past the deduplication window
		// (its transition delivered again minutes later) is shown once.
		k := key{it.item.Flow, it.item.Run, it.item.Checkpoint}
		if seen[k] {
			continue
		}
		seen[k] = true
		page.Items = append(page.Items, it.item)
	}
	more := false
	for i, r := range reads {
		switch {
		case next[i] < len(r.items):
			more = true
		case r.cut:
			// Every item read was taken: carry on below what was read.
			pos[i], more = r.low, true
		case !r.oldest:
			more = true
		default:
			pos[i] = 1 // read to its oldest entry
		}
	}
	if more {
		page.Next = encodeRunsCursor(statuses, pos)
	}
	return page
}

// Outcome says in a line, for a person, what a waiting run waits for or
// how a finished one ended: "waiting for email, name", "waiting for
// approval of issue_refund by supervisor", "approved by sam", "rejected by
// sam: duplicate order", "failed: upstream down", "cancelled by ann:
// customer called back", "expired waiting for approval of issue_refund by
// finance_lead".
func (it RunItem) Outcome() string {
	if p := it.Pending; p != nil {
		return "waiting for " + waitingFor(p.Interrupted())
	}
	f := it.Finished
	if f == nil {
		return it.Status
	}
	with := func(what, who, why string) string {
		if who != "" {
			what += " by " + who
		}
		if why != "" {
			what += ": " + why
		}
		return what
	}
	switch f.Status {
	case protocol.StatusFailed:
		return with("failed", "", firstLine(f.Error))
	case protocol.StatusCancelled:
		return with("cancelled", f.By, firstLine(f.Reason))
	case protocol.StatusExpired:
		if in := f.Interrupt; in != nil {
			return "expired waiting for " + waitingFor(protocol.Interrupted{Kind: in.Kind, Action: in.Action, ApproverRole: in.ApproverRole})
		}
		return "expired"
	}
	if d := f.Decision; d != nil {
		switch d.Verdict {
		case protocol.VerdictReject:
			return with("rejected", d.Approver, firstLine(d.Reason))
		case protocol.VerdictEdit:
			return with("completed, edited", d.Approver, "")
		}
		return with("completed, approved", d.Approver, "")
	}
	return string(f.Status)
}

// waitingFor says what an interrupt asks for, as its kind's spec words
// it.
func waitingFor(in protocol.Interrupted) string {
	if spec, ok := protocol.SpecOf(in.Kind); ok {
		return spec.Asks(in)
	}
	return "a " + in.Kind
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
