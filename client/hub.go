package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// hubIdle is how long a hub keeps its subscription once no call waits:
// calls that follow one another do not subscribe again (each subscription
// made or dropped resets the server's subscription cache of every
// connection), and an idle client does not receive every event.
const hubIdle = 2 * time.Second

// hubFlush bounds the round trip that makes sure the server took the
// hub's subscription.
const hubFlush = 5 * time.Second

// hub is one core subscription to every event subject of a deployment
// (<prefix>.ev.>), shared by the calls of a [Client] and of every copy
// made of it ([Client.As], [Client.WithWait], [Client.WithSource]): a live event wakes the calls waiting on its run whose
// command it may settle. A call believes only what it then reads back
// from the events stream.
type hub struct {
	nc      *nats.Conn
	subject string // <prefix>.ev.>
	skip    int    // len("<prefix>.ev.")

	mu    sync.Mutex
	sub   *nats.Subscription
	idle  *time.Timer
	calls map[string][]*waiter // by "<flow>.<run>"
	// denied is set once the server refused the subscription (the user may
	// subscribe to some event subjects only): calls then follow their run
	// on subscriptions of their own.
	denied bool
}

// waiter is a call waiting on a run's events.
type waiter struct {
	key  string
	verb string
	// live receives the live events that may settle the call; when it is
	// full, one is dropped, and the call finds it in the stream.
	live chan *nats.Msg
}

// newHub returns the hub of a client on nc for the deployment with
// prefix; it subscribes at the first call.
func newHub(nc *nats.Conn, prefix string) *hub {
	return &hub{nc: nc, subject: prefix + ".ev.>", skip: len(prefix) + len(".ev."), calls: map[string][]*waiter{}}
}

// watch registers a call of verb waiting on the run's events, subscribing
// first if the hub is not subscribed. It returns nil when the hub cannot
// be used (the server refused its subscription, or the connection did not
// answer): the call then follows the run on its own.
func (h *hub) watch(ctx context.Context, flow, run, verb string) *waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.denied {
		return nil
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.sub == nil && !h.subscribe(ctx) {
		return nil
	}
	w := &waiter{key: flow + "." + run, verb: verb, live: make(chan *nats.Msg, 4)}
	h.calls[w.key] = append(h.calls[w.key], w)
	return w
}

// subscribe subscribes the hub, and waits for the server to have taken
// the subscription (a round trip, once per idle period), so that a refusal
// is known: the server answers a subscription it does not permit with an
// error before the pong.
func (h *hub) subscribe(ctx context.Context) bool {
	sub, err := h.nc.Subscribe(h.subject, h.deliver)
	if err != nil {
		return false
	}
	// FlushWithContext needs a deadline, which a caller's context may not
	// have.
	ctx, cancel := context.WithTimeout(ctx, hubFlush)
	defer cancel()
	if err := h.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return false
	}
	if err := h.nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+h.subject+`"`) {
		_ = sub.Unsubscribe()
		h.denied = true
		return false
	}
	h.sub = sub
	return true
}

// unwatch removes a call; once none is left for hubIdle, the hub
// unsubscribes.
func (h *hub) unwatch(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.calls[w.key]
	for i, o := range ws {
		if o == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(h.calls, w.key)
	} else {
		h.calls[w.key] = ws
	}
	if len(h.calls) == 0 && h.sub != nil && h.idle == nil {
		h.idle = time.AfterFunc(hubIdle, h.drop)
	}
}

// drop unsubscribes the hub if no call waits.
func (h *hub) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle = nil
	if len(h.calls) == 0 && h.sub != nil {
		_ = h.sub.Unsubscribe()
		h.sub = nil
	}
}

// deliver hands a live event to the calls waiting on its run whose
// command an event of its kind may settle.
func (h *hub) deliver(m *nats.Msg) {
	if len(m.Subject) <= h.skip {
		return
	}
	rest := m.Subject[h.skip:] // <flow>.<run>.<kind>
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return
	}
	key, kind := rest[:i], rest[i+1:]
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.calls[key] {
		if !settles(w.verb, kind) {
			continue
		}
		select {
		case w.live <- m:
		default:
		}
	}
}
