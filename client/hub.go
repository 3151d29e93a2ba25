package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// hubIdle is how long a hub keeps its subscription once no call waits:
// calls that follow one another do not subscribe again (each subscription
// made or dropped resets the server's subscription cache of every
// connection), and an idle client does not receive every event.
const hubIdle = 2 * time.Second

// hubFlush bounds the round trip that makes sure the server took the
// hub's subscription.
const hubFlush = 5 * time.Second

// hubKeys is how long a hub trusts the audit keys it read: a hub that
// stays subscribed, because calls keep coming, reads them again at the
// first call after that, so that a key replaced since vouches for
// nothing.
const hubKeys = time.Minute

// hubInfo bounds the request for the events stream's configuration, which
// a connection of a custom NATS configuration may not be allowed to make
// (the server then drops it, and no answer comes).
const hubInfo = time.Second

// hub is one core subscription to the events of a deployment, shared by
// the calls of a [Client] and of every copy made of it ([Client.As],
// [Client.WithWait], [Client.WithSource]): an event wakes the calls
// waiting on its run whose command it may settle. Where it can read the
// deployment's audit keys, it subscribes to the live events
// (<prefix>.ev.>), and a call believes at once an event signed with one
// of them ([protocol.HeaderEventSignature]); else to the stored events
// (<prefix>.stored.ev.>, where the events stream republishes each event
// once it has stored it, and where no client may publish), and a call
// believes what comes there at once. Where neither applies (an older
// deployment, a connection that may not subscribe there), it subscribes
// to the live events, and a call believes only what it then reads back
// from the events stream, as it does an unsigned live event.
type hub struct {
	nc     *nats.Conn
	stream string // the events stream
	// stored is <prefix>.stored.ev.>, live <prefix>.ev.>.
	stored, live string
	// auditKeys reads the deployment's audit keys, with a request to
	// keysSubject.
	auditKeys   func(ctx context.Context) ([]protocol.AuditKey, error)
	keysSubject string

	mu sync.Mutex
	// keys are the audit keys by kid while the hub is subscribed to the
	// live events trusting signatures, else nil; read at keysAt, and
	// again after keysEvery.
	keys      map[string]ed25519.PublicKey
	keysAt    time.Time
	keysEvery time.Duration
	sub       *nats.Subscription
	idle      *time.Timer
	calls     map[string][]*waiter // by "<flow>.<run>"
	// denied is set once the server refused the subscription to the live
	// events (the user may subscribe to some event subjects only): calls
	// then follow their run on subscriptions of their own. storedDenied
	// is set once it refused the one to the stored events, keysDenied
	// once it refused the connection the audit keys.
	denied, storedDenied, keysDenied bool
	// refreshing is set while a call reads the keys again, outside mu.
	refreshing bool
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
// prefix, reading its audit keys with auditKeys; it subscribes at the
// first call.
func newHub(nc *nats.Conn, names wire.Names, auditKeys func(ctx context.Context) ([]protocol.AuditKey, error)) *hub {
	config := names.ConfigBucket()
	return &hub{nc: nc, stream: names.EventStream(), stored: names.StoredEvents(), live: names.Prefix + ".ev.>", auditKeys: auditKeys,
		keysSubject: "$JS.API.DIRECT.GET.KV_" + config + ".$KV." + config + "." + protocol.AuditKeysKey,
		keysEvery:   hubKeys, calls: map[string][]*waiter{}}
}

// watch registers a call of verb waiting on the run's events, subscribing
// first if the hub is not subscribed. It returns nil when the hub cannot
// be used (the server refused its subscription, or the connection did not
// answer): the call then follows the run on its own.
func (h *hub) watch(ctx context.Context, flow, run, verb string) *waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refreshKeys(ctx)
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

// subscribe subscribes the hub: to the live events trusting signatures
// if it can read the audit keys and the server lets the connection
// subscribe there; else to the stored events if the events stream
// republishes there and the server lets it; else to the live events. It
// reads the keys and asks the stream (once per idle period), and waits
// for the server to have taken the subscription (a round trip), so that a
// refusal is known: the server answers a subscription it does not permit
// with an error before the pong.
func (h *hub) subscribe(ctx context.Context) bool {
	// FlushWithContext needs a deadline, which a caller's context may not
	// have.
	ctx, cancel := context.WithTimeout(ctx, hubFlush)
	defer cancel()
	h.keys = nil
	liveDenied := false
	if keys := h.readKeys(ctx); len(keys) > 0 {
		sub, ok, denied := h.try(ctx, h.live)
		switch {
		case ok:
			h.sub, h.keys, h.keysAt = sub, keys, time.Now()
			return true
		case !denied:
			return false
		}
		liveDenied = true
	}
	if !h.storedDenied && h.republishes(ctx) {
		if sub, ok, denied := h.try(ctx, h.stored); ok {
			h.sub = sub
			return true
		} else if !denied {
			return false
		}
		h.storedDenied = true
	}
	if liveDenied {
		h.denied = true
		return false
	}
	sub, ok, denied := h.try(ctx, h.live)
	if denied {
		h.denied = true
	}
	if ok {
		h.sub = sub
	}
	return ok
}

// try subscribes to subject and waits for the server to have taken the
// subscription; denied is set when the server refused it.
func (h *hub) try(ctx context.Context, subject string) (_ *nats.Subscription, ok, denied bool) {
	sub, err := h.nc.Subscribe(subject, h.deliver)
	if err != nil {
		return nil, false, false
	}
	if err := h.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, false, false
	}
	if err := h.nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
		_ = sub.Unsubscribe()
		return nil, false, true
	}
	return sub, true, false
}

// refreshKeys reads the audit keys again once those the hub trusts are
// keysEvery old. It reads them without holding the hub: calls arriving
// meanwhile trust the keys read before, and only one call reads. h.mu is
// held, and held again when it returns.
func (h *hub) refreshKeys(ctx context.Context) {
	if h.keys == nil || h.refreshing || time.Since(h.keysAt) < h.keysEvery {
		return
	}
	h.refreshing = true
	sub, knownDenied := h.sub, h.keysDenied
	h.mu.Unlock()
	keys, denied := h.fetchKeys(ctx, knownDenied)
	h.mu.Lock()
	h.refreshing = false
	h.keysDenied = h.keysDenied || denied
	if h.sub == sub && h.keys != nil {
		// None read (nil) trusts no signature: calls read back what
		// comes live until the hub subscribes again.
		h.keys, h.keysAt = keys, time.Now()
	}
}

// readKeys returns the keys fetchKeys reads, noting a refusal. h.mu is
// held.
func (h *hub) readKeys(ctx context.Context) map[string]ed25519.PublicKey {
	keys, denied := h.fetchKeys(ctx, h.keysDenied)
	h.keysDenied = h.keysDenied || denied
	return keys
}

// fetchKeys returns the deployment's current audit key by kid (the one
// published last, with any published at the same time), or none when
// they cannot be read within hubInfo (none published, or a connection
// that may not read them: denied is then set, and the hub does not ask
// again, nor when knownDenied). The list keeps every key a deployment
// ever had, to verify old audit records; a key replaced (a secret
// changed, perhaps because it leaked) vouches for no outcome. It reads
// only what never changes in the hub, and may run without h.mu.
func (h *hub) fetchKeys(ctx context.Context, knownDenied bool) (_ map[string]ed25519.PublicKey, denied bool) {
	if h.auditKeys == nil || knownDenied {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, hubInfo)
	defer cancel()
	list, err := h.auditKeys(ctx)
	if err != nil {
		last := h.nc.LastError()
		return nil, errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), `"`+h.keysSubject+`"`)
	}
	var latest time.Time
	for _, k := range list {
		if k.Since.After(latest) {
			latest = k.Since
		}
	}
	keys := make(map[string]ed25519.PublicKey, 1)
	for _, k := range list {
		if pub, err := k.Key(); err == nil && k.Since.Equal(latest) {
			keys[k.Kid] = pub
		}
	}
	return keys, false
}

// signed reports whether m, a live event, is signed with one of the
// deployment's audit keys the hub trusts.
func (h *hub) signed(m *nats.Msg) bool {
	sig := m.Header.Get(protocol.HeaderEventSignature)
	if sig == "" {
		return false
	}
	h.mu.Lock()
	keys := h.keys
	h.mu.Unlock()
	return keys != nil && protocol.VerifyEventSignature(keys, m.Subject, m.Data, sig)
}

// republishes reports whether the events stream republishes every event
// it stores to the stored events' subjects (one request for the stream's
// information, bounded by hubInfo). It does not for a deployment that
// predates it. A connection that may not ask is not asked again.
func (h *hub) republishes(ctx context.Context) bool {
	subject := "$JS.API.STREAM.INFO." + h.stream
	ctx, cancel := context.WithTimeout(ctx, hubInfo)
	defer cancel()
	m, err := h.nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		if last := h.nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), `"`+subject+`"`) {
			h.storedDenied = true
		}
		return false
	}
	var info struct {
		Config struct {
			RePublish *struct {
				Source      string `json:"src"`
				Destination string `json:"dest"`
				HeadersOnly bool   `json:"headers_only"`
			} `json:"republish"`
		} `json:"config"`
	}
	if json.Unmarshal(m.Data, &info) != nil {
		return false
	}
	rp := info.Config.RePublish
	return rp != nil && rp.Source == h.live && rp.Destination == h.stored && !rp.HeadersOnly
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
		h.sub, h.keys = nil, nil
	}
}

// deliver hands an event to the calls waiting on its run whose command
// an event of its kind may settle.
func (h *hub) deliver(m *nats.Msg) {
	rest, ok := h.tail(m.Subject) // <flow>.<run>.<kind>
	if !ok {
		return
	}
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

// tail returns what follows "<prefix>.ev." or "<prefix>.stored.ev." in
// subject.
func (h *hub) tail(subject string) (string, bool) {
	for _, filter := range []string{h.stored, h.live} {
		p := filter[:len(filter)-1]
		if len(subject) > len(p) && strings.HasPrefix(subject, p) {
			return subject[len(p):], true
		}
	}
	return "", false
}

// isStored reports whether subject is one of the stored events'.
func (h *hub) isStored(subject string) bool {
	p := h.stored[:len(h.stored)-1]
	return len(subject) > len(p) && strings.HasPrefix(subject, p)
}
