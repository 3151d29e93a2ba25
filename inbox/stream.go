package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/protocol"
)

// keepAlive is how often an idle stream sends a comment.
const keepAlive = 15 * time.Second

// change is what the stream tells a page: that a run changed, and how.
// The page reads the rest from the server, so no state or answer travels
// on the stream.
type change struct {
	Kind      string `json:"kind"`
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId,omitempty"`
}

// stream answers GET /stream?flow=&run=: server-sent events, one per
// interrupt that comes, is claimed, voted on, reminded, decided, expires
// or is cancelled, and per run that completes. A browser's EventSource reconnects with Last-Event-ID
// and misses nothing the events stream still holds.
func (in *Inbox) stream(w http.ResponseWriter, r *http.Request, s session) {
	v := r.URL.Query()
	// Beside what the API streams, a claim, a vote and a reminder change
	// what the queue and a run's page show.
	kinds := httpapi.StreamKinds
	q := client.WatchQuery{Flow: v.Get("flow"), Run: v.Get("run"), Kinds: kinds}
	for _, n := range [][2]string{{"flow", q.Flow}, {"run", q.Run}} {
		if n[1] == "" {
			continue
		}
		if err := protocol.CheckName(n[0], n[1]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	if q.Run != "" && q.Flow == "" {
		http.Error(w, "run needs flow", http.StatusBadRequest)
		return
	}
	cl := in.client(s)
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		seq, err := strconv.ParseUint(strings.TrimSpace(last), 10, 64)
		if err != nil {
			http.Error(w, "Last-Event-ID is not an id this stream sent", http.StatusBadRequest)
			return
		}
		q.After = seq
	} else {
		seq, err := cl.LastEventSeq(r.Context())
		if err != nil {
			in.log.Error().Err(err).Msg("inbox: starting a stream")
			http.Error(w, "Interlock is unavailable", http.StatusServiceUnavailable)
			return
		}
		q.After = seq
	}
	ctx := r.Context()
	watch, err := cl.Watch(ctx, q)
	if err != nil {
		in.log.Error().Err(err).Msg("inbox: starting a stream")
		http.Error(w, "Interlock is unavailable", http.StatusServiceUnavailable)
		return
	}
	defer watch.Stop()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	msg := fmt.Sprintf("retry: 2000\nid: %d\n\n", q.After)
	for {
		if msg != "" {
			if _, err := w.Write([]byte(msg)); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		next, cancel := context.WithTimeout(ctx, keepAlive)
		ev, err := watch.Next(next)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			msg = ": keep-alive\n\n"
			continue
		default:
			in.log.Error().Err(err).Msg("inbox: stream ended")
			return
		}
		var d struct {
			Flow      string `json:"flow"`
			Run       string `json:"run"`
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(ev.Event.Data(), &d)
		if d.Run == "" {
			d.Run = ev.Event.Subject()
		}
		body, _ := json.Marshal(change{Kind: ev.Kind, Flow: d.Flow, Run: d.Run, RequestID: d.RequestID})
		msg = fmt.Sprintf("id: %d\ndata: %s\n\n", ev.Seq, body)
	}
}
