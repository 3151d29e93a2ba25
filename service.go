// Package interlock runs Interlock: workers that consume CloudEvents from
// NATS JetStream, run flows, pause them on interrupts in a key-value bucket,
// and carry on when the answer comes, on any worker, hours or days later.
//
// [Start] wires the pieces: an embedded NATS server or a connection to an
// external one, the protocol's streams and buckets, the checkpoint store,
// the engine's runner and the workers.
//
//	svc, err := interlock.Start(ctx, interlock.Config{
//		Flows:    []*engine.Flow{booking.Flow()},
//		Embedded: &bus.ServerConfig{DataDir: "interlock-data"},
//	})
//	...
//	defer svc.Stop(context.Background())
package interlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// Config configures a [Service].
type Config struct {
	// Flows to run. At least one.
	Flows []*engine.Flow
	// Embedded, if set, starts an embedded NATS server; otherwise Conn says
	// which server to connect to.
	Embedded *bus.ServerConfig
	// Conn says how to reach an external NATS server.
	Conn wire.ConnConfig
	// Prefix of every stream, subject and bucket. Defaults to wire.DefaultPrefix.
	Prefix string
	// Streams configures the protocol's streams and buckets.
	Streams bus.StreamConfig
	// Secret keys the resume tokens; every worker of a deployment needs the
	// same one, of at least 32 bytes. Defaults to a secret generated once
	// and kept in the <prefix>_keys bucket.
	Secret []byte
	// Instance names this process in event sources (interlock/<instance>).
	// Defaults to the host name.
	Instance string
	// Concurrency is how many messages a worker handles at once. Defaults
	// to bus.DefaultConcurrency.
	Concurrency int
	// AckWait is how long a message may be in a worker's hands before
	// JetStream delivers it to another. Defaults to bus.DefaultAckWait.
	AckWait time.Duration
	// Logger for the service. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// Service is a running Interlock: NATS (embedded or not), and workers.
type Service struct {
	srv    *bus.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	names  wire.Names
	store  *kv.Store
	runner *engine.Runner
	worker *bus.Worker
	once   sync.Once
	err    error
}

// Start starts a service and returns once it consumes: NATS reachable,
// streams and buckets provisioned, the consumer bound.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	if len(cfg.Flows) == 0 {
		return nil, errors.New("interlock: Config.Flows is empty; register at least one flow")
	}
	log := cfg.Logger
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	names, err := wire.NewNames(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Service{names: names}
	fail := func(err error) (*Service, error) {
		s.close()
		return nil, err
	}
	conn := cfg.Conn
	conn.InboxPrefix = cmp.Or(conn.InboxPrefix, bus.WorkerInboxPrefix(names))
	if cfg.Embedded != nil {
		embedded := *cfg.Embedded
		embedded.Prefix = names.Prefix
		srv, err := bus.StartServer(ctx, embedded)
		if err != nil {
			return nil, err
		}
		s.srv = srv
		conn = srv.WorkerConn()
	}
	s.nc, s.js, err = wire.Connect(ctx, conn)
	if err != nil {
		return fail(err)
	}
	if err := bus.Provision(ctx, s.js, names, cfg.Streams); err != nil {
		return fail(err)
	}
	runs, err := s.js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return fail(fmt.Errorf("interlock: binding bucket %s: %w", names.RunsBucket(), err))
	}
	pending, err := s.js.KeyValue(ctx, names.PendingBucket())
	if err != nil {
		return fail(fmt.Errorf("interlock: binding bucket %s: %w", names.PendingBucket(), err))
	}
	s.store = kv.New(runs, pending)
	secret := cfg.Secret
	if len(secret) == 0 {
		secret, err = bus.StoredSecret(ctx, s.js, names, cfg.Streams.Replicas)
		if err != nil {
			return fail(err)
		}
		if cfg.Embedded == nil {
			log.Warn().Str("bucket", names.KeysBucket()).Msg("resume tokens use a generated secret kept in NATS; configure a secret for production")
		}
	}
	queue, err := bus.NewQueue(ctx, s.js, names)
	if err != nil {
		return fail(err)
	}
	instance := cfg.Instance
	if instance == "" {
		instance, _ = os.Hostname()
	}
	source := "interlock/" + cmp.Or(instance, "local")
	s.runner, err = engine.NewRunner(engine.Config{
		Flows: cfg.Flows, Store: s.store, Publisher: bus.NewPublisher(s.js, names, source),
		Queue: queue, Secret: secret, Source: source,
	})
	if err != nil {
		return fail(err)
	}
	s.worker, err = bus.NewWorker(s.js, bus.WorkerConfig{
		Names: names, Runner: s.runner, Concurrency: cfg.Concurrency, Logger: log,
		AckWait: cfg.AckWait, HandlerTimeout: handlerTimeout(cfg.AckWait),
	})
	if err != nil {
		return fail(err)
	}
	if err := s.worker.Start(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// handlerTimeout keeps a message's handling shorter than its ack wait.
func handlerTimeout(ackWait time.Duration) time.Duration {
	if ackWait == 0 {
		return 0
	}
	return ackWait * 5 / 6
}

// URL is the NATS URL clients use to reach this service's server.
func (s *Service) URL() string {
	if s.srv != nil {
		return s.srv.ClientURL()
	}
	return s.nc.ConnectedUrl()
}

// Names are the service's stream, subject and bucket names.
func (s *Service) Names() wire.Names { return s.names }

// Store is the service's checkpoint store.
func (s *Service) Store() *kv.Store { return s.store }

// Runner is the service's engine runner.
func (s *Service) Runner() *engine.Runner { return s.runner }

// JetStream is the service's JetStream context.
func (s *Service) JetStream() jetstream.JetStream { return s.js }

// Stop drains the workers (messages in hand finish, or are left to be
// delivered again when ctx ends), closes the connection, and shuts the
// embedded server down. Stopping twice is safe.
func (s *Service) Stop(ctx context.Context) error {
	s.once.Do(func() {
		if s.worker != nil {
			s.err = s.worker.Stop(ctx)
		}
		s.close()
	})
	return s.err
}

func (s *Service) close() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.srv != nil {
		s.srv.Shutdown()
	}
}
