package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// pool is the machinery the floors share around their work: a
// connection, the streams and buckets of names provisioned, and a pool of
// goroutines consuming the inbound stream through a durable consumer
// configured as bus.Worker's, handing each start and resume to the
// floor's own start and resume.
type pool struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names wire.Names
	w     workload
	// what names the floor in its errors ("floor", "minimum floor").
	what          string
	start, resume func(ctx context.Context, cmd command) error

	iter     jetstream.MessagesContext
	msgs     chan jetstream.Msg
	wg       sync.WaitGroup
	abort    context.CancelFunc
	stopOnce sync.Once
	stopErr  error

	mu  sync.Mutex
	err error
}

// connectPool connects to the server at url as connName and provisions
// the streams and buckets of names there with replicas replicas; the
// caller sets start and resume, then calls run.
func connectPool(ctx context.Context, url, connName, what string, names wire.Names, w workload, replicas int) (_ *pool, err error) {
	nc, js, err := wire.Connect(ctx, connConfig(url, connName))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	if err := bus.Provision(ctx, js, names, bus.StreamConfig{Replicas: replicas}); err != nil {
		return nil, err
	}
	if err := kv.Provision(ctx, js, names, kv.BucketConfig{Replicas: replicas}); err != nil {
		return nil, err
	}
	return &pool{nc: nc, js: js, names: names, w: w, what: what, msgs: make(chan jetstream.Msg)}, nil
}

// run starts consuming with workers goroutines.
func (p *pool) run(ctx context.Context, workers int) error {
	stream, err := p.js.Stream(ctx, p.names.InStream())
	if err != nil {
		return fmt.Errorf("binding stream %s: %w", p.names.InStream(), err)
	}
	// The same consumer configuration as bus.Worker's.
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       p.names.Consumer(),
		FilterSubject: p.names.Prefix + ".in.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       bus.DefaultAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * workers,
	})
	if err != nil {
		return fmt.Errorf("creating consumer %s: %w", p.names.Consumer(), err)
	}
	if p.iter, err = cons.Messages(jetstream.PullMaxMessages(workers)); err != nil {
		return fmt.Errorf("consuming %s: %w", p.names.Consumer(), err)
	}
	base, abort := context.WithCancel(context.WithoutCancel(ctx))
	p.abort = abort
	p.wg.Go(p.dispatch)
	for range workers {
		p.wg.Go(func() {
			for msg := range p.msgs {
				p.handle(base, msg)
			}
		})
	}
	return nil
}

// dispatch hands messages to the pool until the iterator is closed.
func (p *pool) dispatch() {
	defer close(p.msgs)
	for {
		msg, err := p.iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			continue // a missed heartbeat or the like; the iterator carries on
		}
		p.msgs <- msg
	}
}

// stop stops consuming, waits for the pool, and closes the connection.
// Stopping twice is safe; stopping a pool that never ran closes the
// connection.
func (p *pool) stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.shutdown(ctx) })
	return p.stopErr
}

func (p *pool) shutdown(ctx context.Context) error {
	if p.iter == nil {
		p.nc.Close()
		return nil
	}
	p.iter.Drain()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(stopWait):
		err = fmt.Errorf("%s workers did not stop within %s", p.what, stopWait)
		p.abort()
		p.iter.Stop()
		<-done
	case <-ctx.Done():
		err = fmt.Errorf("stopping %s workers: %w", p.what, ctx.Err())
		p.abort()
		p.iter.Stop()
		<-done
	}
	p.abort()
	p.nc.Close()
	return err
}

// failure is the first error a worker met, if any.
func (p *pool) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pool) handle(base context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(base, floorHandlerTimeout)
	defer cancel()
	var cmd command
	err := json.Unmarshal(msg.Data(), &cmd)
	switch {
	case err != nil:
		err = fmt.Errorf("decoding %s: %w", msg.Subject(), err)
	case strings.HasSuffix(msg.Subject(), ".start"):
		err = p.start(ctx, cmd)
	case strings.HasSuffix(msg.Subject(), ".resume"):
		err = p.resume(ctx, cmd)
	default:
		err = fmt.Errorf("unexpected subject %s", msg.Subject())
	}
	if err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = fmt.Errorf("%s worker: %w", p.what, err)
		}
		p.mu.Unlock()
		// Tell the waiting client at once rather than let it time out.
		if cmd.Subject != "" {
			_ = p.nc.Publish(p.names.Event(p.w.flow, cmd.Subject, "failed"), []byte(err.Error()))
		}
		_ = msg.Term()
		return
	}
	_ = msg.Ack()
}
