package bus

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of [StreamConfig].
const (
	DefaultEventMaxAge = 7 * 24 * time.Hour
	DefaultDuplicates  = 2 * time.Minute
	DefaultHistory     = 5
)

// StreamConfig sets what Provision may vary.
type StreamConfig struct {
	// EventMaxAge is how long events are kept. Defaults to DefaultEventMaxAge.
	EventMaxAge time.Duration
	// Duplicates is the deduplication window of every stream. Defaults to
	// DefaultDuplicates.
	Duplicates time.Duration
	// History is how many revisions of a checkpoint are kept, at least 5.
	// Defaults to DefaultHistory.
	History int
	// Replicas of every stream and bucket, for a cluster. Defaults to 1.
	Replicas int
	// Memory stores everything in memory instead of files: for tests and
	// benchmarks only.
	Memory bool
}

// Provision creates the streams and buckets of the protocol, or updates
// them to this configuration. It is idempotent: every worker calls it at start.
func Provision(ctx context.Context, js jetstream.JetStream, n wire.Names, cfg StreamConfig) error {
	cfg.EventMaxAge = cmp.Or(cfg.EventMaxAge, DefaultEventMaxAge)
	cfg.Duplicates = cmp.Or(cfg.Duplicates, DefaultDuplicates)
	cfg.History = cmp.Or(cfg.History, DefaultHistory)
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	if cfg.History < 5 || cfg.History > 64 {
		return fmt.Errorf("bus: checkpoint history %d is out of range: use 5 to 64", cfg.History)
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	streams := []jetstream.StreamConfig{
		{
			Name: n.InStream(), Subjects: []string{n.Prefix + ".in.>"},
			Description: "Interlock inbound commands",
			Retention:   jetstream.WorkQueuePolicy, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas,
		},
		{
			Name: n.EventStream(), Subjects: []string{n.Prefix + ".ev.>"},
			Description: "Interlock run events",
			Retention:   jetstream.LimitsPolicy, MaxAge: cfg.EventMaxAge, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true,
		},
		{
			Name: n.AuditStream(), Subjects: []string{n.Prefix + ".audit.>"},
			Description: "Interlock audit records (append-only)",
			Retention:   jetstream.LimitsPolicy, Storage: storage,
			DenyDelete: true, DenyPurge: true,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas, AllowDirect: true,
		},
		{
			Name: n.DeadLetterStream(), Subjects: []string{n.Prefix + ".dlq.>"},
			Description: "Interlock inbound messages that could not be accepted",
			Retention:   jetstream.LimitsPolicy, Storage: storage,
			Duplicates: cfg.Duplicates, Replicas: cfg.Replicas,
		},
	}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("bus: creating stream %s: %w", sc.Name, err)
		}
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: n.RunsBucket(), Description: "Interlock checkpoints", History: uint8(cfg.History), Storage: storage, Replicas: cfg.Replicas},
		{Bucket: n.PendingBucket(), Description: "Interlock runs waiting on an interrupt", History: 1, Storage: storage, Replicas: cfg.Replicas},
	}
	for _, kc := range buckets {
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("bus: creating bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}
