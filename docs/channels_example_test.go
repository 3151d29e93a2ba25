package docs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
)

// pager is a channel of its own (docs/channels.md, Adding a channel): it
// pages a person's number, the directory's addresses.pager, with what
// waits and the link to decide.
type pager struct {
	send func(ctx context.Context, number, text string) error
}

func (pager) Name() string { return "pager" }

func (p pager) Post(ctx context.Context, n notify.Notice) (string, error) {
	text := fmt.Sprintf("%s: %s %s", n.Why, n.Interrupt.Title, n.Link)
	if err := p.send(ctx, n.Address, text); err != nil {
		return "", err // tried again later; notify.Permanent(err) if it never will work
	}
	return "paged", nil
}

// TestThePagerOfTheDocsPassesTheChannelSuite: the channel the docs add
// is a channel like mail and Web Push.
func TestThePagerOfTheDocsPassesTheChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{Name: "pager", New: func(t *testing.T) channeltest.Remote { return newPagers() }})
}

// pagers is the suite's paging service, in memory.
type pagers struct {
	mu       sync.Mutex
	got      []channeltest.Received
	answers  map[string]channeltest.Answer
	released chan struct{}
}

func newPagers() *pagers {
	return &pagers{answers: map[string]channeltest.Answer{}, released: make(chan struct{})}
}

func (p *pagers) Reach(_ *testing.T, _ *interlock.Service, person string) (string, string) {
	return "+1555" + person, "+1555" + person
}

func (p *pagers) RoleAddress(string) string { return "" }

func (p *pagers) Start(t *testing.T, svc *interlock.Service, cfg notify.Dispatch) func() {
	d, err := notify.StartDispatch(t.Context(), svc, pager{send: p.page}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := func() { _ = d.Stop(context.WithoutCancel(t.Context())) }
	t.Cleanup(func() { p.Answer("", channeltest.Accept); stop() })
	return stop
}

// page takes a page to number, as the service answers it.
func (p *pagers) page(ctx context.Context, number, text string) error {
	for {
		p.mu.Lock()
		a, released := p.answers[number], p.released
		p.mu.Unlock()
		switch a {
		case channeltest.Fail:
			return errors.New("the paging service is busy")
		case channeltest.Refuse:
			return notify.Permanent(errors.New("no such pager"))
		case channeltest.Hang:
			select {
			case <-released:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return errors.New("the paging service hung")
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got = append(p.got, channeltest.Received{Address: number, Link: lastField(text), Text: text})
		return nil
	}
}

// lastField is the last space-separated field of s.
func lastField(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ' ' {
			return s[i+1:]
		}
	}
	return s
}

func (p *pagers) Received() []channeltest.Received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]channeltest.Received(nil), p.got...)
}

func (p *pagers) Answer(number string, a channeltest.Answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if number == "" {
		clear(p.answers)
	} else {
		p.answers[number] = a
	}
	close(p.released)
	p.released = make(chan struct{})
}
