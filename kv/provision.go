package kv

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// Defaults of [BucketConfig].
const (
	DefaultHistory    = 5
	DefaultMarkerTTL  = 30 * time.Second
	DefaultDuplicates = 2 * time.Minute
)

// BucketConfig sets what [Provision] may vary.
type BucketConfig struct {
	// History is how many revisions of a checkpoint are kept, 5 to 64.
	// Defaults to DefaultHistory.
	History int
	// MarkerTTL is how long the buckets keep the marker of a removed key:
	// a pending entry removed by a resume, or a finished run's checkpoint
	// removed when its retention ran out. A KV watcher that reconnects
	// later than this misses the removal. At least 1s. Defaults to
	// DefaultMarkerTTL.
	MarkerTTL time.Duration
	// Replicas of the buckets and the finished-runs streams: 1, or 3 (5)
	// on a cluster. Defaults to 1.
	Replicas int
	// Duplicates is the deduplication window of the finished-runs
	// streams, as of the bus's streams. Defaults to DefaultDuplicates.
	Duplicates time.Duration
	// Memory stores everything in memory instead of files: for tests and
	// benchmarks only.
	Memory bool
	// Retry, if set, runs each creation, retrying what a forming cluster
	// cannot do yet (the bus's StreamConfig.Retry does); without it each
	// is tried once.
	Retry func(ctx context.Context, what string, create func(context.Context) error) error
}

func (c BucketConfig) withDefaults() BucketConfig {
	c.History = cmp.Or(c.History, DefaultHistory)
	c.MarkerTTL = cmp.Or(c.MarkerTTL, DefaultMarkerTTL)
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.Duplicates = cmp.Or(c.Duplicates, DefaultDuplicates)
	if c.Retry == nil {
		c.Retry = func(ctx context.Context, _ string, create func(context.Context) error) error { return create(ctx) }
	}
	return c
}

// Validate reports, before anything reaches the server, a setting the
// server would refuse, naming the field and the bound.
func (c BucketConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.History < 5 || c.History > 64:
		return fmt.Errorf("kv: checkpoint history %d is out of range: use 5 to 64", c.History)
	case c.MarkerTTL < time.Second:
		return fmt.Errorf("kv: BucketConfig.MarkerTTL %v is too short: JetStream keeps markers at least 1s", c.MarkerTTL)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("kv: BucketConfig.Replicas %d is out of range: use 1 to 5", c.Replicas)
	}
	return nil
}

// Provision creates the store's buckets (the checkpoints, the pending
// index) and the streams of its finished-runs index, or updates them to
// this configuration. It is idempotent: every worker calls it at start,
// before [Open]. Buckets made by an older version are updated to allow
// per-message TTLs (which a server never turns off again).
func Provision(ctx context.Context, js jetstream.JetStream, n wire.Names, cfg BucketConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	for _, kc := range []jetstream.KeyValueConfig{
		{
			Bucket: n.RunsBucket(), Description: "Interlock checkpoints", History: uint8(cfg.History),
			Storage: storage, Replicas: cfg.Replicas, LimitMarkerTTL: cfg.MarkerTTL,
		},
		{
			Bucket: n.PendingBucket(), Description: "Interlock runs waiting on an interrupt", History: 1,
			Storage: storage, Replicas: cfg.Replicas, LimitMarkerTTL: cfg.MarkerTTL,
		},
	} {
		if err := cfg.Retry(ctx, "bucket "+kc.Bucket, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateKeyValue(ctx, kc)
			return err
		}); err != nil {
			return err
		}
	}
	for _, status := range wire.FinishedStatuses {
		// The finished-runs index: one entry per run that finished with
		// status, written with the Nats-TTL of the run's checkpoint, so
		// that it goes when the checkpoint goes. One stream per status:
		// listing one status never steps over runs of another, and a
		// stream's few subjects (one per flow) keep the server's counts
		// cheap however many runs it holds.
		sc := jetstream.StreamConfig{
			Name: n.FinishedStream(status), Subjects: []string{n.Prefix + ".finished." + status + ".>"},
			Description: "Interlock finished-runs index: runs " + status,
			Retention:   jetstream.LimitsPolicy, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true, AllowMsgTTL: true,
		}
		if err := cfg.Retry(ctx, "stream "+sc.Name, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, sc)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
