package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// followPoll is how often a follower reads the stream when no live message
// has woken it: live messages may be lost (a reconnection, a slow
// subscriber), the stream's are not.
const followPoll = 500 * time.Millisecond

// follower reads the events of one subject filter (a run's) from the
// events stream, in stream order, from the moment it was made. A call
// believes only what Interlock stored there: the live messages on the
// subjects only wake the follower up, since anyone who can make the server
// publish on them (a reply aimed at them, a copy of a stored message)
// could send one.
type follower struct {
	g    directGet
	next uint64
	buf  []batchMsg
	wake chan struct{}
	sub  *nats.Subscription
}

// follow starts following filter, a subject filter of the events stream.
// Live messages of a kind wakes does not select (nil for every kind) do
// not wake the follower: their events are read from the stream with the
// next one that does. Stop the follower when done.
func (c *Client) follow(ctx context.Context, filter string, wakes func(kind string) bool) (*follower, error) {
	stream := c.names.EventStream()
	f := &follower{g: directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: filter, what: "stream " + stream},
		wake: make(chan struct{}, 1)}
	sub, err := c.nc.Subscribe(filter, func(m *nats.Msg) {
		if wakes != nil && !wakes(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]) {
			return
		}
		select {
		case f.wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("client: subscribing to %s: %w", filter, err)
	}
	// No flush: the server reads this connection in order, so the
	// subscription is in place before it answers the read below, and
	// before anything published after that.
	f.sub = sub
	last, _, err := f.g.last(ctx)
	if err != nil {
		f.stop()
		return nil, err
	}
	f.next = last + 1
	return f, nil
}

// poll returns the next stored event, or ok false when there is none yet.
func (f *follower) poll(ctx context.Context) (m batchMsg, ok bool, err error) {
	if len(f.buf) == 0 {
		b, err := f.g.batch(ctx, f.next, 32)
		if err != nil {
			return batchMsg{}, false, err
		}
		if len(b.msgs) == 0 {
			return batchMsg{}, false, nil
		}
		f.buf = b.msgs
		f.next = b.msgs[len(b.msgs)-1].seq + 1
	}
	m, f.buf = f.buf[0], f.buf[1:]
	return m, true, nil
}

func (f *follower) stop() { _ = f.sub.Unsubscribe() }
