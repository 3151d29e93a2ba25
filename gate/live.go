package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/internal/kvwatch"
)

// Key is the key of the rule set's YAML in the configuration bucket.
const Key = "gate.rules"

// ErrNoRules is returned by [Load] when the bucket holds no rule set.
var ErrNoRules = errors.New("gate: no rules in the configuration bucket")

// ConfigKV is the part of a JetStream key-value bucket the gate uses;
// jetstream.KeyValue implements it.
type ConfigKV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
}

var _ ConfigKV = jetstream.KeyValue(nil)

// sourceName is the source name of a rule set read from kv.
func sourceName(bucket string) string { return "kv " + bucket + " " + Key }

// Put writes rs's YAML to kv under [Key], replacing what is there, and
// returns the new revision. A service calls it at start with the rules
// of its file, so that every worker watching the key applies them.
func Put(ctx context.Context, kv ConfigKV, rs *RuleSet) (uint64, error) {
	if rs == nil || len(rs.source) == 0 {
		return 0, errors.New("gate: Put needs a rule set made by gate.Parse")
	}
	rev, err := kv.Put(ctx, Key, rs.source)
	if err != nil {
		return 0, fmt.Errorf("gate: writing the rules of %s to key %s: %w", rs.name, Key, err)
	}
	return rev, nil
}

// Load reads and parses the rule set kv holds under [Key], and returns it
// with its revision. It returns an error wrapping [ErrNoRules] when the
// key is absent or deleted, and the parse error when the value does not
// compile.
func Load(ctx context.Context, kv ConfigKV) (*RuleSet, uint64, error) {
	e, err := kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w (key %s); start the service with --gate-rules FILE, or put the YAML there", ErrNoRules, Key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("gate: reading key %s: %w", Key, err)
	}
	rs, err := Parse(e.Value(), sourceName(e.Bucket()))
	if err != nil {
		return nil, 0, err
	}
	return rs, e.Revision(), nil
}

// Live holds the current rule set of a worker and keeps it up to date
// with the key-value bucket. It is safe for concurrent use.
//
// [Live.Watch] starts a goroutine that applies every new value of [Key]
// that compiles; [Live.Stop] stops it and waits for it.
type Live struct {
	cur     atomic.Pointer[applied]
	refused atomic.Pointer[Refusal]

	mu sync.Mutex // guards the watch below
	w  *kvwatch.Watch
}

// applied is a rule set and the KV revision it came from (0 if none).
type applied struct {
	rules *RuleSet
	rev   uint64
}

// Refusal is a value of the key that did not compile.
type Refusal struct {
	// Revision is the KV revision of the value.
	Revision uint64
	// Err is the parse error.
	Err error
}

// NewLive returns a Live that holds initial, with revision 0. A nil
// initial holds an empty rule set, which allows every call.
func NewLive(initial *RuleSet) *Live {
	if initial == nil {
		initial = &RuleSet{name: "no rules", source: []byte("rules: []\n"), byTool: map[string][]int{}}
	}
	l := &Live{}
	l.cur.Store(&applied{rules: initial})
	return l
}

// Current returns the rule set in force.
func (l *Live) Current() *RuleSet { return l.cur.Load().rules }

// Revision returns the KV revision of the rule set in force: 0 until a
// value of the key has been applied.
func (l *Live) Revision() uint64 { return l.cur.Load().rev }

// Refused returns the value of the key that did not compile, if it is
// the key's last value, or nil. A health check can report it: the bucket
// then holds rules the workers do not apply.
func (l *Live) Refused() *Refusal { return l.refused.Load() }

// Match asks the rule set in force about req; see [RuleSet.Match].
func (l *Live) Match(ctx context.Context, req Request) Match {
	return l.Current().Match(ctx, req)
}

// Watch watches [Key] in kv and applies every value that compiles, in
// revision order. It returns once the value the key holds now has been
// applied (or refused), so Current reflects the bucket; ctx bounds that
// start and nothing after it.
//
// A value that does not compile is refused: the rule set in force stays,
// the error is logged with the rule and its position, and [Live.Refused]
// returns it. Deleting or purging the key keeps the rule set in force and
// logs a warning. If the connection closes, the watch ends with a
// warning and the rule set in force stays.
//
// Call [Live.Stop] to stop the watch; Watch while a watch runs is an
// error.
func (l *Live) Watch(ctx context.Context, kv ConfigKV, log zerolog.Logger) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return errors.New("gate: Live is already watching; call Stop before watching again")
	}
	w, err := kvwatch.Start(ctx, kv, Key, func(e jetstream.KeyValueEntry) { l.apply(e, log) }, func() {
		log.Warn().Str("key", Key).Uint64("revision", l.Revision()).
			Msg("gate rules: the watch of the configuration key ended (the NATS connection closed); the rules in force stay until the service restarts")
	})
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	l.w = w
	return nil
}

// apply applies or refuses one value of the key.
func (l *Live) apply(e jetstream.KeyValueEntry, log zerolog.Logger) {
	cur := l.cur.Load()
	if e.Revision() <= cur.rev {
		return
	}
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		log.Warn().Str("key", Key).Str("bucket", e.Bucket()).Uint64("revision", e.Revision()).Uint64("applied_revision", cur.rev).
			Msg("gate rules: the configuration key was deleted; the rules in force stay. Put a rule set (rules: [] to allow every call) to change them")
		l.refused.Store(nil)
		return
	}
	rs, err := Parse(e.Value(), sourceName(e.Bucket()))
	if err != nil {
		l.refused.Store(&Refusal{Revision: e.Revision(), Err: err})
		ev := log.Error().Err(err).Str("key", Key).Str("bucket", e.Bucket()).Uint64("revision", e.Revision()).Uint64("applied_revision", cur.rev)
		var pe *Error
		if errors.As(err, &pe) {
			if pe.Rule > 0 {
				ev = ev.Int("rule", pe.Rule).Str("rule_name", pe.Name)
			}
			if pe.Line > 0 {
				ev = ev.Int("line", pe.Line)
			}
			if pe.Field != "" {
				ev = ev.Str("field", pe.Field)
			}
		}
		ev.Msg("gate rules: refused a new rule set that does not compile; the rules in force stay. Fix the YAML and put it again")
		return
	}
	l.cur.Store(&applied{rules: rs, rev: e.Revision()})
	l.refused.Store(nil)
	log.Info().Str("key", Key).Uint64("revision", e.Revision()).Int("rules", len(rs.rules)).Msg("gate rules: applied a new rule set")
}

// Stop stops the watch started by [Live.Watch] and waits for its
// goroutine, or for ctx. Stopping a Live that does not watch, or
// stopping twice, does nothing.
func (l *Live) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return nil
	}
	if err := l.w.Stop(ctx); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	l.w = nil
	return nil
}
