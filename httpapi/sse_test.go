package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// sseMessage is one message of an event stream.
type sseMessage struct {
	id    uint64
	event string
	data  string
}

// eventStream is an open GET /v1/events.
type eventStream struct {
	msgs   chan sseMessage
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openEvents opens GET /v1/events?query with header pairs, and reads its
// messages in the background until close.
func openEvents(t *testing.T, a *api, query string, header ...string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/v1/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := httpClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Cache-Control") != "no-store" {
		cancel()
		res.Body.Close()
		t.Fatalf("GET /v1/events = %d %v", res.StatusCode, res.Header)
	}
	s := &eventStream{msgs: make(chan sseMessage, 256), cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(s.msgs)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var m sseMessage
		fields := 0
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if fields > 0 {
					s.msgs <- m
				}
				m, fields = sseMessage{}, 0
				continue
			}
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "": // a comment
				continue
			case "id":
				m.id, _ = strconv.ParseUint(value, 10, 64)
			case "event":
				m.event = value
			case "data":
				if m.data != "" {
					m.data += "\n"
				}
				m.data += value
			}
			fields++
		}
	}()
	t.Cleanup(s.close)
	return s
}

// next returns the next message, failing the test after natstest.Wait.
func (s *eventStream) next(t *testing.T) sseMessage {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return m
	case <-time.After(natstest.Wait):
		t.Fatal("no event within the wait")
	}
	return sseMessage{}
}

func (s *eventStream) close() {
	s.cancel()
	s.wg.Wait()
}

func TestEventsResumeAfterTheLastEventID(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-other", "state": refundState(nil)["state"]})

	first := openEvents(t, a, "flow=booking")
	hello := first.next(t)
	if hello.event != "" || hello.data != "" {
		t.Fatalf("the stream begins with %+v, want only the id it starts after", hello)
	}
	for _, run := range []string{"s-1", "s-2", "s-3"} {
		a.accepted("POST", "/v1/runs/booking", map[string]any{"run": run})
	}
	var got []sseMessage
	for range 3 {
		m := first.next(t)
		var ev struct {
			Type string
			Data protocol.Interrupted
		}
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil || m.event != "interrupted" || ev.Type != protocol.TypeInterrupted ||
			ev.Data.ResumeToken != events.Redacted || ev.Data.Flow != "booking" || m.id <= hello.id {
			t.Fatalf("message %+v: %v", m, err)
		}
		got = append(got, m)
	}
	a.accepted("POST", "/v1/runs/booking/s-1/resume", map[string]any{"answers": map[string]any{"email": "ada@example.com"}})
	m := first.next(t)
	if m.event != "resumed" {
		t.Fatalf("after the answer: %+v", m)
	}
	got = append(got, m)
	first.close()

	// Missed while away: an interrupt, a cancel, a new run.
	a.accepted("POST", "/v1/runs/booking/s-2/cancel", nil)
	a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "s-4"})
	a.accepted("POST", "/v1/runs/refund/r-other/resume", map[string]any{"decision": "approve"}) // another flow

	want := streamed(t, a, hello.id, "booking")
	again := openEvents(t, a, "flow=booking", "Last-Event-ID", strconv.FormatUint(got[len(got)-1].id, 10))
	if m := again.next(t); m.id != got[len(got)-1].id || m.data != "" {
		t.Fatalf("the reconnected stream begins with %+v", m)
	}
	for len(got) < len(want) {
		got = append(got, again.next(t))
	}
	for i := range want {
		if got[i].id != want[i].id || got[i].event != want[i].event {
			t.Fatalf("event %d: got %d %s, want %d %s (got %v, want %v)", i, got[i].id, got[i].event, want[i].id, want[i].event, got, want)
		}
	}
	select {
	case m := <-again.msgs:
		t.Fatalf("an event beyond the stream's: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}

	// lastEventId in the query, and kinds.
	q := openEvents(t, a, "kind=completed&lastEventId="+strconv.FormatUint(hello.id, 10))
	q.next(t)
	if m := q.next(t); m.event != "completed" || !strings.Contains(m.data, `"r-other"`) {
		t.Fatalf("completed = %+v", m)
	}

	// The server's stop ends streams.
	open := openEvents(t, a, "")
	open.next(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := a.server.Stop(ctx); err != nil {
		t.Fatalf("stopping with a stream open: %v", err)
	}
	select {
	case _, ok := <-open.msgs:
		if ok {
			t.Fatal("a message after the stop")
		}
	case <-time.After(natstest.Wait):
		t.Fatal("the stream outlived the server")
	}
}

// streamed returns what the events stream holds after seq for flow, of
// the kinds GET /v1/events streams, read message by message.
func streamed(t *testing.T, a *api, after uint64, flow string) []sseMessage {
	t.Helper()
	s, err := a.svc.JetStream().Stream(t.Context(), a.svc.Names().EventStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []sseMessage
	for seq := after + 1; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		tokens := strings.Split(m.Subject, ".")
		if kind := tokens[len(tokens)-1]; tokens[2] == flow && slices.Contains(httpapi.StreamKinds, kind) {
			out = append(out, sseMessage{id: seq, event: kind})
		}
	}
	return out
}

func TestEventsRefuseABadQuery(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	for _, q := range []string{"kind=started", "run=r-1", "flow=a.b", "nope=1", "lastEventId=x"} {
		a.must(http.StatusBadRequest, "GET", "/v1/events?"+q, nil).problem(t)
	}
	a.must(http.StatusBadRequest, "GET", "/v1/events", nil, "Last-Event-ID", "-1").problem(t)
}
