package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/wire"
)

// Defaults of [StreamConfig].
const (
	DefaultEventMaxAge = 7 * 24 * time.Hour
	DefaultAuditMaxAge = 365 * 24 * time.Hour
	DefaultDuplicates  = 2 * time.Minute
	// DefaultClusterWait bounds how long Provision waits for a cluster to
	// form: a JetStream meta leader, and enough nodes for the replicas.
	DefaultClusterWait = 2 * time.Minute
)

// StreamConfig sets what Provision may vary.
type StreamConfig struct {
	// EventMaxAge is how long events are kept, at least Duplicates.
	// Defaults to DefaultEventMaxAge.
	EventMaxAge time.Duration
	// AuditMaxAge is how long audit records are kept, at least Duplicates;
	// the audit stream denies deletes and purges, so this is the only way
	// records leave it. Defaults to DefaultAuditMaxAge.
	AuditMaxAge time.Duration
	// Duplicates is the deduplication window of every stream. Defaults to
	// DefaultDuplicates.
	Duplicates time.Duration
	// Replicas of every stream and bucket, for a cluster: 1, or 3 on a
	// cluster of at least 3 JetStream nodes (5 are allowed). The Service
	// picks it when 0 (see interlock.Config.Streams). Defaults to 1.
	Replicas int
	// ClusterWait bounds how long Provision waits, retrying with backoff,
	// while the cluster forms: no JetStream meta leader yet, or too few
	// nodes up for Replicas. Defaults to DefaultClusterWait.
	ClusterWait time.Duration
	// Logger, if set, hears each wait for the cluster. Defaults to none.
	Logger *zerolog.Logger
	// Memory stores everything in memory instead of files: for tests and
	// benchmarks only.
	Memory bool
}

func (c StreamConfig) withDefaults() StreamConfig {
	c.EventMaxAge = cmp.Or(c.EventMaxAge, DefaultEventMaxAge)
	c.AuditMaxAge = cmp.Or(c.AuditMaxAge, DefaultAuditMaxAge)
	c.Duplicates = cmp.Or(c.Duplicates, DefaultDuplicates)
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.ClusterWait = cmp.Or(c.ClusterWait, DefaultClusterWait)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// validate checks a configuration with its defaults filled in, before
// the server sees it, so that a bad value is named with its fix.
// Validate reports, before anything reaches the server, a setting the
// server would refuse or that would break a promise, naming the field and
// the bound.
func (c StreamConfig) Validate() error { return c.withDefaults().validate() }

func (c StreamConfig) validate() error {
	switch {
	case c.Duplicates < 100*time.Millisecond:
		return fmt.Errorf("bus: StreamConfig.Duplicates %v is too short: use at least 100ms", c.Duplicates)
	case c.EventMaxAge < c.Duplicates:
		return fmt.Errorf("bus: StreamConfig.EventMaxAge (--events-max-age) %v is shorter than the deduplication window %v: keep events at least %v", c.EventMaxAge, c.Duplicates, c.Duplicates)
	case c.AuditMaxAge < c.Duplicates:
		return fmt.Errorf("bus: StreamConfig.AuditMaxAge (--audit-max-age) %v is shorter than the deduplication window %v: keep audit records at least %v", c.AuditMaxAge, c.Duplicates, c.Duplicates)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("bus: StreamConfig.Replicas %d is out of range: use 1 to 5", c.Replicas)
	}
	return nil
}

// Provision creates the streams of the protocol and the live-configuration
// bucket, or updates them to this configuration (the checkpoint store's
// buckets are kv.Provision's). It is idempotent: every worker calls it at
// start. Buckets created by an older version are updated to allow
// per-message TTLs (which a server never turns off again).
func Provision(ctx context.Context, js jetstream.JetStream, n wire.Names, cfg StreamConfig) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := CheckServerVersion(js.Conn().ConnectedServerVersion()); err != nil {
		return err
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	streams := []jetstream.StreamConfig{
		{
			// The deadlines of interrupts are message schedules on
			// <prefix>.schedule.>, which no consumer reads: the server
			// publishes each to <prefix>.due.<flow>.expire at its time,
			// even if no worker runs then, and the workers consume those.
			// Only the workers may publish here: a stream that allows
			// schedules also allows roll-ups (the server forces it), and
			// a schedule may target any subject of its stream, so no
			// client may reach it (docs/operations.md, Security).
			Name: n.ScheduleStream(), Subjects: []string{n.Prefix + ".schedule.>", n.Prefix + ".due.>"},
			Description: "Interlock interrupt deadlines (message schedules) and the commands they fire",
			Retention:   jetstream.WorkQueuePolicy, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true,
			AllowMsgSchedules: true, AllowRollup: true,
		},
		inboundStream(n, cfg, storage),
		{
			Name: n.EventStream(), Subjects: []string{n.Prefix + ".ev.>"},
			Description: "Interlock run events",
			Retention:   jetstream.LimitsPolicy, MaxAge: cfg.EventMaxAge, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true,
			// Each event, once stored, again on <prefix>.stored.ev.>,
			// where only the server publishes: a client learns its
			// outcome there without reading it back.
			RePublish: &jetstream.RePublish{Source: n.Prefix + ".ev.>", Destination: n.StoredEvents()},
		},
		{
			Name: n.AuditStream(), Subjects: []string{n.Prefix + ".audit.>"},
			Description: "Interlock audit records (append-only)",
			Retention:   jetstream.LimitsPolicy, MaxAge: cfg.AuditMaxAge, Storage: storage,
			DenyDelete: true, DenyPurge: true,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true,
		},
		{
			Name: n.DeadLetterStream(), Subjects: []string{n.Prefix + ".dlq.>"},
			Description: "Interlock inbound messages that could not be accepted",
			Retention:   jetstream.LimitsPolicy, Storage: storage,
			// No direct gets: a dead letter is a client's message, kept
			// whole, and a direct get without headers can aim it, by its
			// reply subject, at an inbound subject (see readable in
			// auth.go). Message gets wrap it in JSON.
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas,
		},
	}
	w := clusterWait{cfg: cfg, deadline: time.Now().Add(cfg.ClusterWait)}
	// An inbound stream of an earlier version, which held the deadlines,
	// is emptied into a holding stream first, and put back once the
	// streams are made.
	if err := migrateInbound(ctx, js, n, w); err != nil {
		return err
	}
	for _, sc := range streams {
		if err := w.do(ctx, "stream "+sc.Name, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, sc)
			return err
		}); err != nil {
			return err
		}
	}
	if err := restoreHeld(ctx, js, n, w); err != nil {
		return err
	}
	// The live configuration, which the workers watch and write. The
	// store's buckets are kv's to provision (kv.Provision).
	kc := jetstream.KeyValueConfig{
		Bucket: n.ConfigBucket(), Description: "Interlock live configuration (gate.rules, audit.keys, flows)", History: 5,
		Storage: storage, Replicas: cfg.Replicas,
	}
	if err := w.do(ctx, "bucket "+kc.Bucket, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, kc)
		return err
	}); err != nil {
		return err
	}
	// Who runs now: each worker's entry lives PresenceTTL after its last
	// write.
	wc := jetstream.KeyValueConfig{
		Bucket: n.WorkersBucket(), Description: "Interlock's running workers: each one's flows and their versions", History: 1,
		TTL: PresenceTTL, Storage: storage, Replicas: cfg.Replicas,
	}
	return w.do(ctx, "bucket "+wc.Bucket, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, wc)
		return err
	})
}

// Retry returns a function that runs a creation the way Provision runs
// its own: retried, with backoff, while a cluster forms, up to
// ClusterWait from now. It is kv.BucketConfig.Retry for the store's
// buckets.
func (c StreamConfig) Retry() func(ctx context.Context, what string, create func(context.Context) error) error {
	c = c.withDefaults()
	return clusterWait{cfg: c, deadline: time.Now().Add(c.ClusterWait)}.do
}

// Ensure runs create, the creation of a stream or bucket of a component
// that starts after provisioning (a channel's bucket, its retry stream),
// as Provision runs its own: each attempt bounded, retried with backoff
// while a cluster forms, or while a replicated asset's creation goes
// unanswered (a new group's leader elected late; the request sent again
// finds it made), for up to DefaultClusterWait.
func Ensure(ctx context.Context, what string, create func(context.Context) error) error {
	return StreamConfig{}.Retry()(ctx, what, create)
}

// inboundStream is the configuration of the inbound stream, the only one
// clients publish to. It allows none of the JetStream features a header of
// a published message can set off (message schedules, roll-ups, per-message
// TTLs, counters, batches): the server refuses a command that asks for one,
// so no client can purge the stream, schedule a message to a subject it may
// not publish, or make a command vanish before a worker has it.
func inboundStream(n wire.Names, cfg StreamConfig, storage jetstream.StorageType) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: n.InStream(), Subjects: []string{n.Prefix + ".in.>", n.Prefix + ".at.>"},
		Description: "Interlock inbound commands",
		Retention:   jetstream.WorkQueuePolicy, Storage: storage,
		Duplicates: cfg.Duplicates, Replicas: cfg.Replicas,
	}
}

// ErrReplicas: the server cannot hold the replicas asked for.
var ErrReplicas = errors.New("bus: the NATS server cannot hold the replicas asked for")

// JetStream's errors while a cluster forms or lacks nodes.
const (
	errCodeClusterNotAvail       jetstream.ErrorCode = 10008 // no meta leader (yet)
	errCodeNoPeers               jetstream.ErrorCode = 10005 // too few nodes for the replicas
	errCodeInsufficientResources jetstream.ErrorCode = 10023 // too few nodes for the replicas
	errCodeReplicasNotSupported  jetstream.ErrorCode = 10074 // replicas > 1 on a single server
)

// attemptTimeout bounds one request of Provision while the cluster forms.
const attemptTimeout = 2 * time.Second

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// clusterWait retries what a forming cluster cannot do yet, with backoff,
// until its deadline.
type clusterWait struct {
	cfg      StreamConfig
	deadline time.Time
}

// do calls create until it succeeds, fails for good, or the wait ends.
func (w clusterWait) do(ctx context.Context, what string, create func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// A node without a meta leader may not answer at all: bound each
		// attempt, and every attempt by the wait.
		actx, cancel := context.WithDeadline(ctx, earliest(w.deadline, time.Now().Add(attemptTimeout)))
		err := create(actx)
		cancel()
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		isAPI := errors.As(err, &apiErr)
		switch {
		case isAPI && apiErr.ErrorCode == errCodeReplicasNotSupported:
			return fmt.Errorf("%w: creating %s with %d replicas: this server is not in a cluster (%v); "+
				"use --replicas 1, or run a cluster of at least %d nodes (--cluster-name, --routes; see docs/operations.md, Clustering)",
				ErrReplicas, what, w.cfg.Replicas, err, w.cfg.Replicas)
		case ctx.Err() != nil:
			return fmt.Errorf("bus: creating %s: %w", what, err)
		}
		short := isAPI && (apiErr.ErrorCode == errCodeNoPeers || apiErr.ErrorCode == errCodeInsufficientResources)
		forming := isAPI && apiErr.ErrorCode == errCodeClusterNotAvail ||
			errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrTimeout) ||
			errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
			errors.Is(err, jetstream.ErrNoStreamResponse)
		if !short && !forming {
			return fmt.Errorf("bus: creating %s: %w", what, err)
		}
		if time.Now().Add(backoff).After(w.deadline) {
			if short {
				return fmt.Errorf("%w: creating %s with %d replicas: too few JetStream nodes are up after %s (%v); "+
					"start the cluster's other nodes, or use --replicas 1 (a cluster holds 3 replicas only with 3 nodes up)",
					ErrReplicas, what, w.cfg.Replicas, w.cfg.ClusterWait, err)
			}
			return fmt.Errorf("bus: creating %s: JetStream is still unavailable after %s (%w); "+
				"in a cluster, start enough nodes for a quorum (2 of 3) and check that their routes connect", what, w.cfg.ClusterWait, err)
		}
		w.cfg.Logger.Warn().Err(err).Str("what", what).Int("replicas", w.cfg.Replicas).Int("attempt", attempt).
			Dur("retry_in", backoff).Msg("waiting for the JetStream cluster to form")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bus: creating %s: %w (while waiting for the cluster: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// MinServerVersion is the oldest nats-server Interlock runs on: interrupt
// deadlines are JetStream message schedules, which came in 2.12.
const MinServerVersion = "2.12.0"

// CheckServerVersion refuses a server older than [MinServerVersion],
// naming the version needed: deadlines would otherwise never fire.
func CheckServerVersion(version string) error {
	major, minor, ok := parseVersion(version)
	if !ok {
		return fmt.Errorf("bus: the NATS server reports version %q, which Interlock cannot read; it needs nats-server %s or later (for interrupt deadlines, JetStream message schedules)", version, MinServerVersion)
	}
	if major < 2 || major == 2 && minor < 12 {
		return fmt.Errorf("bus: the NATS server is version %s; Interlock needs nats-server %s or later, whose JetStream message schedules fire interrupt deadlines: upgrade the server", version, MinServerVersion)
	}
	return nil
}

func parseVersion(v string) (major, minor int, ok bool) {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err error
	if major, err = strconv.Atoi(parts[0]); err != nil {
		return 0, 0, false
	}
	if minor, err = strconv.Atoi(parts[1]); err != nil {
		return 0, 0, false
	}
	return major, minor, true
}
