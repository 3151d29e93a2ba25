package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// StreamKinds are the kinds of event GET /v1/events streams: what a live
// inbox needs to show interrupts as they come, are decided and go.
var StreamKinds = []string{
	protocol.EventInterrupted, protocol.EventResumed, protocol.EventExpired,
	protocol.EventCancelled, protocol.EventCompleted, protocol.EventDecided,
	protocol.EventAssigned, protocol.EventVoted, protocol.EventReminded,
	protocol.EventAnswered,
}

// Timing of an event stream.
const (
	// keepAlive is how often an idle stream sends a comment, so that
	// proxies keep it open and a dead client is noticed.
	keepAlive = 15 * time.Second
	// retryMillis is how long a browser waits before it reconnects.
	retryMillis = 2000
)

// watchEvents answers GET /v1/events with server-sent events: each event
// of StreamKinds from the events stream, its stream sequence as the SSE
// id. A client that reconnects with Last-Event-ID (or ?lastEventId=) gets
// every event published after that one, each once, in order. A client
// without one starts from now; the first message of the stream sets the
// id to where it starts, so that even a reconnect before any event misses
// nothing.
func (s *Server) watchEvents(w http.ResponseWriter, r *http.Request, c Caller) {
	if !checkQuery(w, r, "flow", "run", "kind", "lastEventId") {
		return
	}
	v := r.URL.Query()
	q := client.WatchQuery{Flow: v.Get("flow"), Run: v.Get("run"), Kinds: StreamKinds}
	for _, n := range [][2]string{{"flow", q.Flow}, {"run", q.Run}} {
		if n[1] == "" {
			continue
		}
		if err := protocol.CheckName(n[0], n[1]); err != nil {
			writeProblem(w, newProblem(CodeInvalidQuery, strings.TrimPrefix(err.Error(), "client: ")))
			return
		}
	}
	if q.Run != "" && q.Flow == "" {
		writeProblem(w, newProblem(CodeInvalidQuery, "run needs flow"))
		return
	}
	if kinds := v["kind"]; len(kinds) > 0 {
		q.Kinds = nil
		for _, k := range kinds {
			if !slices.Contains(StreamKinds, k) {
				writeProblem(w, newProblem(CodeInvalidQuery, fmt.Sprintf("kind=%q: use %s", k, strings.Join(StreamKinds, ", "))))
				return
			}
			q.Kinds = append(q.Kinds, k)
		}
	}
	cl := s.client(c, 0)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = v.Get("lastEventId")
	}
	if last != "" {
		seq, err := strconv.ParseUint(strings.TrimSpace(last), 10, 64)
		if err != nil {
			writeProblem(w, newProblem(CodeInvalidQuery, fmt.Sprintf("Last-Event-ID %q is not an id this stream sent", truncate(last, 40))))
			return
		}
		q.After = seq
	} else {
		seq, err := cl.LastEventSeq(r.Context())
		if err != nil {
			s.fail(w, err)
			return
		}
		q.After = seq
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()
	watch, err := cl.Watch(ctx, q)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer watch.Stop()

	readable := &readCache{s: s, c: c, cl: cl, runs: map[string]bool{}}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "retry: %d\nid: %d\n\n", retryMillis, q.After)
	for {
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			buf.Reset()
		}
		next, cancelNext := context.WithTimeout(ctx, keepAlive)
		ev, err := watch.Next(next)
		cancelNext()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			buf.WriteString(": keep-alive\n\n")
			continue
		default:
			s.log.Error().Err(err).Msg("event stream ended")
			return
		}
		if !readable.may(ctx, ev) {
			continue
		}
		body, err := encodeEvent(ev.Event)
		if err != nil {
			s.log.Error().Err(err).Uint64("stream_seq", ev.Seq).Msg("event stream: encoding an event")
			return
		}
		fmt.Fprintf(&buf, "id: %d\nevent: %s\n", ev.Seq, ev.Kind)
		for line := range bytes.Lines(bytes.TrimSpace(body)) {
			fmt.Fprintf(&buf, "data: %s\n", bytes.TrimRight(line, "\r\n"))
		}
		buf.WriteByte('\n')
	}
}

// maxReadCache bounds the runs a stream remembers the readability of.
const maxReadCache = 1024

// readCache says, for one stream's caller, whether each event's run may
// be read: an ask's or a tool call's events go to whoever asked and whoever
// may decide it, the authority says which, from the run's checkpoint,
// read once per run while the stream remembers it.
type readCache struct {
	s    *Server
	c    Caller
	cl   *client.Client
	runs map[string]bool
}

// may reports whether the caller may see ev.
func (rc *readCache) may(ctx context.Context, ev client.StreamEvent) bool {
	flow := events.StringExtension(ev.Event, protocol.ExtFlow)
	if flow != protocol.AskFlow && flow != protocol.GateFlow || !rc.s.port.Authority().Identified() {
		return true
	}
	key := flow + "." + ev.Event.Subject()
	if ok, seen := rc.runs[key]; seen {
		return ok
	}
	cp, err := rc.cl.Checkpoint(ctx, flow, ev.Event.Subject())
	ok := err == nil && rc.s.port.Authority().MayRead(rc.c, authority.RunOf(cp)) == nil
	if len(rc.runs) >= maxReadCache {
		clear(rc.runs)
	}
	rc.runs[key] = ok
	return ok
}
