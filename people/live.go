package people

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

// ErrNoDirectory is returned by [Load] when the bucket holds no directory.
var ErrNoDirectory = errors.New("people: no directory in the configuration bucket")

// ConfigKV is the part of a JetStream key-value bucket the directory
// uses; jetstream.KeyValue implements it.
type ConfigKV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
}

var _ ConfigKV = jetstream.KeyValue(nil)

// sourceName is the source name of a directory read from bucket.
func sourceName(bucket string) string { return "kv " + bucket + " " + Key }

// Put writes d's YAML to kv under [Key], replacing what is there, and
// returns the new revision. A service calls it at start, and whenever its
// file changes, so that every process watching the key applies it.
func Put(ctx context.Context, kv ConfigKV, d *Directory) (uint64, error) {
	if d == nil {
		return 0, errors.New("people: Put needs a directory made by people.Parse")
	}
	rev, err := kv.Put(ctx, Key, d.source)
	if err != nil {
		return 0, fmt.Errorf("people: writing the directory of %s to key %s: %w", d.name, Key, err)
	}
	return rev, nil
}

// Load reads and parses the directory kv holds under [Key], and returns it
// with its revision. It returns an error wrapping [ErrNoDirectory] when
// the key is absent or deleted, and the parse error when the value does
// not parse.
func Load(ctx context.Context, kv ConfigKV) (*Directory, uint64, error) {
	e, err := kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w (key %s); start the service with --people FILE, or put the YAML there", ErrNoDirectory, Key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("people: reading key %s: %w", Key, err)
	}
	d, err := Parse(e.Value(), sourceName(e.Bucket()))
	if err != nil {
		return nil, 0, err
	}
	return d, e.Revision(), nil
}

// Live holds the directory in force in a process and keeps it up to date
// with the key-value bucket. It is safe for concurrent use.
//
// The directory in force joins two layers (see [Merge]): the value of
// [Key] in the bucket, which every process shares, and a local one, which
// [Live.SetLocal] sets from the files of older versions this process
// reads (an auth file, a Slack configuration's users). Either may be
// absent; with neither, [Live.Current] is nil: no directory.
//
// [Live.Watch] starts a goroutine that applies every new value of [Key]
// that parses; [Live.Stop] stops it and waits for it.
type Live struct {
	wmu sync.Mutex // guards w; held while a watch starts or stops
	w   *kvwatch.Watch

	mu      sync.Mutex // guards shared, rev, local and cur's computation
	shared  *Directory // the bucket's (or the initial) directory
	rev     uint64     // the revision of shared, 0 if not from the bucket
	local   *Directory
	cur     atomic.Pointer[Directory]
	refused atomic.Pointer[Refusal]
}

// Refusal is a value of the key that was not applied.
type Refusal struct {
	// Revision is the KV revision of the value.
	Revision uint64
	// Err says why: the parse error, or the conflict with the local
	// directory.
	Err error
}

// NewLive returns a Live whose shared directory is initial (nil: none),
// with revision 0.
func NewLive(initial *Directory) *Live {
	l := &Live{shared: initial}
	l.cur.Store(initial)
	return l
}

// Current returns the directory in force, or nil when there is none: no
// --people, no auth file, and nothing in the bucket.
func (l *Live) Current() *Directory { return l.cur.Load() }

// Revision returns the KV revision of the shared directory in force: 0
// until a value of the key has been applied.
func (l *Live) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Refused returns the value of the key that was not applied, if it is the
// key's last value, or nil. A health check can report it: the bucket then
// holds a directory this process does not apply.
func (l *Live) Refused() *Refusal { return l.refused.Load() }

// SetLocal sets the local layer of the directory in force (nil: none). A
// local directory that conflicts with the shared one (see [Merge]) is an
// error, and the directory in force stays.
func (l *Live) SetLocal(d *Directory) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, err := Merge(mergedName, l.shared, d)
	if err != nil {
		return err
	}
	l.local = d
	l.cur.Store(m)
	return nil
}

// mergedName names the directory that joins the shared and local ones.
const mergedName = "the directory with the older files"

// Watch watches [Key] in kv and applies every value that parses, in
// revision order. It returns once the value the key holds now has been
// applied (or refused), so Current reflects the bucket; ctx bounds that
// start and nothing after it.
//
// A value that does not parse, or conflicts with the local directory, is
// refused: the directory in force stays, the error is logged with the
// value's revision, and [Live.Refused] returns it. Deleting or purging
// the key keeps the directory in force and logs a warning. If the
// connection closes, the watch ends with a warning and the directory in
// force stays.
//
// Call [Live.Stop] to stop the watch; Watch while a watch runs is an
// error.
func (l *Live) Watch(ctx context.Context, kv ConfigKV, log zerolog.Logger) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w != nil {
		return errors.New("people: Live is already watching; call Stop before watching again")
	}
	w, err := kvwatch.Start(ctx, kv, Key, func(e jetstream.KeyValueEntry) { l.apply(e, log) }, func() {
		log.Warn().Str("key", Key).Uint64("revision", l.Revision()).
			Msg("people: the watch of the configuration key ended (the NATS connection closed); the directory in force stays until the service restarts")
	})
	if err != nil {
		return fmt.Errorf("people: %w", err)
	}
	l.w = w
	return nil
}

// apply applies or refuses one value of the key.
func (l *Live) apply(e jetstream.KeyValueEntry, log zerolog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Revision() <= l.rev {
		return
	}
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		log.Warn().Str("key", Key).Str("bucket", e.Bucket()).Uint64("revision", e.Revision()).Uint64("applied_revision", l.rev).
			Msg("people: the directory's configuration key was deleted; the directory in force stays. Put a directory (people: [] for nobody) to change it")
		l.refused.Store(nil)
		return
	}
	d, err := Parse(e.Value(), sourceName(e.Bucket()))
	var m *Directory
	if err == nil {
		m, err = Merge(mergedName, d, l.local)
	}
	if err != nil {
		l.refused.Store(&Refusal{Revision: e.Revision(), Err: err})
		log.Error().Err(err).Str("key", Key).Str("bucket", e.Bucket()).Uint64("revision", e.Revision()).Uint64("applied_revision", l.rev).
			Msg("people: refused a new directory; the directory in force stays. Fix the YAML and put it again")
		return
	}
	l.shared, l.rev = d, e.Revision()
	l.cur.Store(m)
	l.refused.Store(nil)
	log.Info().Str("key", Key).Uint64("revision", e.Revision()).Int("people", d.Len()).Int("roles", len(d.roles)).Msg("people: applied a new directory")
}

// Stop stops the watch started by [Live.Watch] and waits for its
// goroutine, or for ctx. Stopping a Live that does not watch, or
// stopping twice, does nothing.
func (l *Live) Stop(ctx context.Context) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.w == nil {
		return nil
	}
	if err := l.w.Stop(ctx); err != nil {
		return fmt.Errorf("people: %w", err)
	}
	l.w = nil
	return nil
}
