// Package kv keeps Interlock's checkpoints and pending index in JetStream
// key-value buckets, and its finished-runs index in streams. [Store] implements [engine.Store]: one JSON document per
// run under key <flow>.<run>, written with Create for the first write and
// Update with the revision read for every later one, so a conflict is a
// typed error and never an overwrite. The KV revision is the run's
// checkpoint number.
//
// [Open] binds the two buckets of a deployment. A store opened so keeps
// only what it must:
//
//   - The write that finishes a run (completed, failed, cancelled, expired)
//     carries a per-message TTL ([Options.KeepFinished]) and a subject
//     roll-up, which removes the run's older revisions. When the TTL runs
//     out, JetStream removes the checkpoint itself and leaves a short-lived
//     marker; a Load then says [engine.ErrNotFound]. No sweeper is needed.
//   - Removing a pending entry is a KV purge whose marker carries the
//     bucket's marker TTL, so the pending index holds the runs that wait,
//     plus the markers of runs resumed within that TTL, and nothing else.
//     (A server killed with SIGKILL may bring purged entries back,
//     nats-server's issue #8505: [Store.SweepPending] removes them, and
//     `interlock serve` calls it once at each start.)
//
// Both need buckets that allow per-message TTLs (a LimitMarkerTTL), as
// [Provision] creates them.
//
// The store is also an [engine.FinishedIndex]: the finished-runs index,
// one stream per finished status (wire.Names.FinishedStream), holds one
// entry per finished run ([Store.PutFinished]), written with the same TTL
// as the checkpoint that finished the run, so that an entry goes when its
// run does. Readers list it newest first with direct gets (client.ListRuns).
package kv

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// DefaultKeepFinished is how long a finished run's checkpoint is kept
// unless [Options.KeepFinished] says otherwise.
const DefaultKeepFinished = 30 * 24 * time.Hour

// KeepForever, as [Options.KeepFinished], keeps finished runs for ever.
const KeepForever time.Duration = -1

// Options configure a store opened with [Open].
type Options struct {
	// KeepFinished is how long the checkpoint of a finished run (completed,
	// failed, cancelled or expired) is kept after the write that finished
	// it; JetStream then removes it. At least one second, or KeepForever.
	// JetStream raises a retention shorter than the bucket's marker TTL
	// to that TTL. Defaults to DefaultKeepFinished.
	KeepFinished time.Duration
}

func (o Options) withDefaults() Options {
	o.KeepFinished = cmp.Or(o.KeepFinished, DefaultKeepFinished)
	return o
}

func (o Options) validate() error {
	if o.KeepFinished != KeepForever && o.KeepFinished < time.Second {
		return fmt.Errorf("kv: Options.KeepFinished %v is too short: JetStream's per-message TTL is at least 1s; use 1s or more, or KeepForever", o.KeepFinished)
	}
	return nil
}

// Bucket is the part of a JetStream key-value bucket the store uses.
type Bucket interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
}

// publisher publishes a message to a stream with expectations and headers
// the KV API does not take (a TTL and a roll-up on a compare-and-set).
type publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// lastGetter reads the last message of a subject, markers included.
type lastGetter interface {
	GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
}

// Store keeps checkpoints in the runs bucket and the pending index in the
// pending bucket.
type Store struct {
	runs    Bucket
	pending Bucket
	// limit is the largest message the server takes (max_payload), 0 if unknown.
	limit int

	// Set by Open; zero in a store made with New.
	pub         publisher
	runsStream  lastGetter
	runsSubject string // $KV.<runs bucket>.
	// pendingSubject is $KV.<pending bucket>.
	pendingSubject string
	// nc reads checkpoints from the leader of runsBucket's stream.
	nc           *nats.Conn
	runsBucket   string
	pendingKV    jetstream.KeyValue
	keepFinished time.Duration // 0: finished runs stay
	markerTTL    time.Duration // 0: a removed pending entry leaves a marker for ever
	// names names the finished-runs index's streams; zero in a store
	// made with New, which keeps no such index.
	names wire.Names

	// beforeSweepPurge, if set, is called by SweepPending between its
	// read of a stale entry and its purge (tests).
	beforeSweepPurge func(key string)

	// size is the size of the last checkpoint written, the capacity the
	// next one's buffer starts with.
	size atomic.Int64
}

// encode writes a checkpoint's document.
func (s *Store) encode(cp *engine.Checkpoint) ([]byte, error) {
	n := s.size.Load()
	b, err := cp.AppendJSON(make([]byte, 0, n+n/4+64))
	s.size.Store(int64(len(b)))
	return b, err
}

// Option configures a [Store].
type Option func(*Store)

// MaxPayload tells the store the largest message the NATS server takes
// (the connection's MaxPayload), so that a checkpoint too large to write is
// a [*engine.TooLargeError] that names the limit.
func MaxPayload(n int64) Option { return func(s *Store) { s.limit = int(n) } }

var (
	_ engine.Store         = (*Store)(nil)
	_ engine.DocLoader     = (*Store)(nil)
	_ engine.FinishedIndex = (*Store)(nil)
)

// New returns a store over two bound buckets. It keeps finished runs, and
// the markers of removed pending entries, for ever, and keeps no
// finished-runs index: a service uses [Open].
func New(runs, pending Bucket, opts ...Option) *Store {
	s := &Store{runs: runs, pending: pending}
	for _, o := range opts {
		o(s)
	}
	return s
}

// tooLarge turns the client's refusal to send an oversized message into
// the engine's typed error.
func (s *Store) tooLarge(cp *engine.Checkpoint, size int, err error) error {
	if !errors.Is(err, nats.ErrMaxPayload) && (s.limit == 0 || size <= s.limit) {
		return nil
	}
	return &engine.TooLargeError{Flow: cp.Flow, Run: cp.Run, Size: size, Limit: cmp.Or(s.limit, size-1)}
}

// Open binds the runs and pending buckets of a deployment, which
// [Provision] creates, and checks that they allow per-message TTLs.
func Open(ctx context.Context, js jetstream.JetStream, names wire.Names, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bind := func(bucket string) (jetstream.KeyValue, jetstream.KeyValueStatus, error) {
		b, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return nil, nil, fmt.Errorf("kv: binding bucket %s: %w (provision it first: `interlock serve` or kv.Provision does)", bucket, err)
		}
		st, err := b.Status(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("kv: reading the configuration of bucket %s: %w", bucket, err)
		}
		if st.LimitMarkerTTL() == 0 {
			return nil, nil, fmt.Errorf("kv: bucket %s does not allow per-message TTLs (it was created by an older Interlock); run `interlock serve` (or kv.Provision) once with this version to update it", bucket)
		}
		return b, st, nil
	}
	runs, _, err := bind(names.RunsBucket())
	if err != nil {
		return nil, err
	}
	pending, pst, err := bind(names.PendingBucket())
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("kv: binding the stream of bucket %s: %w", names.RunsBucket(), err)
	}
	for _, status := range wire.FinishedStatuses {
		name := names.FinishedStream(status)
		fs, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("kv: binding stream %s of the finished-runs index: %w (provision it first: `interlock serve` or kv.Provision does, once with this version)", name, err)
		}
		if !fs.CachedInfo().Config.AllowMsgTTL {
			return nil, fmt.Errorf("kv: stream %s does not allow per-message TTLs, so its entries would outlive their runs; run `interlock serve` (or kv.Provision) once with this version to update it", name)
		}
	}
	s := New(runs, pending, MaxPayload(js.Conn().MaxPayload()))
	s.pub, s.nc, s.runsBucket = js, js.Conn(), names.RunsBucket()
	s.runsStream = stream
	s.runsSubject = "$KV." + names.RunsBucket() + "."
	s.pendingSubject = "$KV." + names.PendingBucket() + "."
	s.pendingKV = pending
	s.markerTTL = pst.LimitMarkerTTL()
	s.names = names
	if opts.KeepFinished != KeepForever {
		s.keepFinished = opts.KeepFinished
	}
	return s, nil
}

// Key returns the key of a run: <flow>.<run>.
func Key(flow, run string) string { return flow + "." + run }

// Load implements [engine.Store]. The revision returned is the checkpoint
// number. A run removed after its retention is [engine.ErrNotFound].
func (s *Store) Load(ctx context.Context, flow, run string) (*engine.Checkpoint, uint64, error) {
	doc, rev, err := s.LoadDoc(ctx, flow, run)
	if err != nil {
		return nil, 0, err
	}
	var cp engine.Checkpoint
	if err := json.Unmarshal(doc, &cp); err != nil {
		return nil, 0, fmt.Errorf("kv: checkpoint %s at revision %d is not a checkpoint document: %w", Key(flow, run), rev, err)
	}
	return &cp, rev, nil
}

// LoadDoc implements [engine.DocLoader]: it returns the checkpoint's JSON
// document as stored, and its revision, as Load does.
//
// In a store opened with [Open] it reads from the leader of the runs
// bucket's stream (the STREAM.MSG.GET API), never from a follower: on a
// cluster, a follower that fell behind (cut off, paused, catching up)
// still answers the direct gets a KV Get sends, with what it had, and a
// worker that read a checkpoint older than the command in hand would
// take the command for one that no longer applies and acknowledge it
// without effect (a deadline that an escalation scheduled, seen before
// the escalation: the run waits for ever). A write could not go wrong on
// a stale read (every write is a compare-and-set); a decision to write
// nothing could. Clients read with direct gets, which may lag.
func (s *Store) LoadDoc(ctx context.Context, flow, run string) ([]byte, uint64, error) {
	if s.nc != nil {
		return s.leaderGet(ctx, Key(flow, run))
	}
	e, err := s.runs.Get(ctx, Key(flow, run))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, engine.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("kv: reading checkpoint %s: %w", Key(flow, run), err)
	}
	return e.Value(), e.Revision(), nil
}

// leaderGet reads key of the runs bucket from its stream's leader: the
// document and its revision, or engine.ErrNotFound for none, or a marker.
func (s *Store) leaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	doc, rev, err := wire.LeaderKV(ctx, s.nc, s.runsBucket, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, engine.ErrNotFound
	case err != nil:
		return nil, 0, fmt.Errorf("kv: reading checkpoint %s: %w", key, err)
	}
	return doc, rev, nil
}

// finishes reports whether writing cp takes the finished-run retention.
func (s *Store) finishes(cp *engine.Checkpoint) bool {
	return s.keepFinished > 0 && cp.Status.Finished()
}

// Create implements [engine.Store].
func (s *Store) Create(ctx context.Context, cp *engine.Checkpoint) (uint64, error) {
	key := Key(cp.Flow, cp.Run)
	b, err := s.encode(cp)
	if err != nil {
		return 0, fmt.Errorf("kv: encoding checkpoint %s: %w", key, err)
	}
	if err := s.tooLarge(cp, len(b), nil); err != nil {
		return 0, err
	}
	var rev uint64
	if s.finishes(cp) {
		rev, err = s.createFinished(ctx, key, b)
	} else {
		rev, err = s.runs.Create(ctx, key, b)
	}
	if big := s.tooLarge(cp, len(b), err); big != nil {
		return 0, big
	}
	if errors.Is(err, engine.ErrExists) {
		return 0, err
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, engine.ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("kv: creating checkpoint %s: %w", key, err)
	}
	return rev, nil
}

// createFinished creates a run that finished in its first transition. As
// a KV Create does, it writes over a key whose last message is a marker.
func (s *Store) createFinished(ctx context.Context, key string, b []byte) (uint64, error) {
	rev, err := s.writeFinished(ctx, key, b, 0)
	if !wrongLastSequence(err) {
		return rev, err
	}
	last, gerr := s.runsStream.GetLastMsgForSubject(ctx, s.runsSubject+key)
	if gerr != nil {
		return 0, fmt.Errorf("kv: creating checkpoint %s: reading what is there: %w", key, gerr)
	}
	if !isMarker(last.Header) {
		return 0, engine.ErrExists
	}
	rev, err = s.writeFinished(ctx, key, b, last.Sequence)
	if wrongLastSequence(err) {
		return 0, engine.ErrExists
	}
	return rev, err
}

// isMarker reports whether a KV message is a delete or purge marker, or a
// marker JetStream left when a message's TTL or age ran out.
func isMarker(h nats.Header) bool { return wire.IsKVMarker(h) }

// Update implements [engine.Store].
func (s *Store) Update(ctx context.Context, cp *engine.Checkpoint, rev uint64) (uint64, error) {
	key := Key(cp.Flow, cp.Run)
	b, err := s.encode(cp)
	if err != nil {
		return 0, fmt.Errorf("kv: encoding checkpoint %s: %w", key, err)
	}
	if err := s.tooLarge(cp, len(b), nil); err != nil {
		return 0, err
	}
	var next uint64
	if s.finishes(cp) {
		next, err = s.writeFinished(ctx, key, b, rev)
	} else {
		next, err = s.runs.Update(ctx, key, b, rev)
	}
	if big := s.tooLarge(cp, len(b), err); big != nil {
		return 0, big
	}
	if wrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0, &engine.ConflictError{Flow: cp.Flow, Run: cp.Run, Expected: rev}
	}
	if err != nil {
		return 0, fmt.Errorf("kv: updating checkpoint %s from revision %d: %w", key, rev, err)
	}
	return next, nil
}

// writeFinished is a KV update from rev (0: the key must not exist) that
// also sets the message's TTL to the finished-run retention and rolls the
// key's older revisions up, so none outlives the run or resurfaces when
// the TTL runs out. It returns the new revision.
func (s *Store) writeFinished(ctx context.Context, key string, b []byte, rev uint64) (uint64, error) {
	m := nats.NewMsg(s.runsSubject + key)
	m.Data = b
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := s.pub.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(s.keepFinished))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// wrongLastSequence reports whether err is JetStream refusing a
// compare-and-set (10071; 10164 on replicated streams).
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// PutPending implements [engine.Store]. In a store opened with [Open]
// the write carries a Nats-Msg-Id naming the run and p.Checkpoint, so
// that a copy of it still in flight when its repeat lands (a write held up
// by a partition, sent again after a timeout) is dropped by JetStream's
// deduplication instead of undoing the run's later writes.
func (s *Store) PutPending(ctx context.Context, p *protocol.Pending) error {
	key := Key(p.Flow, p.Run)
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("kv: encoding pending entry %s: %w", key, err)
	}
	if s.pub != nil {
		m := nats.NewMsg(s.pendingSubject + key)
		m.Data = b
		_, err = s.pub.PublishMsg(ctx, m, jetstream.WithMsgID(pendingWriteID(key, p.Checkpoint, "put")))
	} else {
		_, err = s.pending.Put(ctx, key, b)
	}
	if err != nil {
		return fmt.Errorf("kv: writing pending entry %s: %w", key, err)
	}
	return nil
}

// DeletePending implements [engine.Store]. In a store opened with [Open]
// it purges the key with a marker that JetStream removes after the
// bucket's marker TTL, so resumed runs do not pile up in the index, and
// with a Nats-Msg-Id naming the run and rev, as PutPending's.
func (s *Store) DeletePending(ctx context.Context, flow, run string, rev uint64) error {
	key := Key(flow, run)
	var err error
	switch {
	case s.pub != nil:
		// A KV purge, as jetstream.KeyValue.Purge writes it, with an id.
		m := nats.NewMsg(s.pendingSubject + key)
		m.Header.Set(kvOperation, kvPurge)
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(pendingWriteID(key, rev, "del"))}
		if s.markerTTL > 0 {
			opts = append(opts, jetstream.WithMsgTTL(s.markerTTL))
		}
		_, err = s.pub.PublishMsg(ctx, m, opts...)
	case s.markerTTL > 0:
		err = s.pending.Purge(ctx, key, jetstream.PurgeTTL(s.markerTTL))
	default:
		err = s.pending.Delete(ctx, key)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("kv: deleting pending entry %s: %w", key, err)
	}
	return nil
}

// SweepPending removes from the pending index the entries of runs that
// no longer wait there: a run whose checkpoint, read from the runs
// bucket's leader, is finished, or is gone (its retention ran out). It
// returns how many it removed. The engine removes a run's entry itself
// when the run moves on, so the index holds such entries only when a
// removal was undone behind its back: nats-server's issue #8505 brings a
// purged key's old value back when a server killed with SIGKILL rebuilds
// a store whose purge marker's TTL ran out (docs/reliability.md), and
// inboxes would list those runs as waiting for good.
//
// It reads every key of the index and one checkpoint per key: O(pending),
// the runs that wait. Each entry is read from the pending bucket's leader
// and purged only at the revision read, so that an entry the engine
// rewrote meanwhile (a run waiting again) is kept. A store made with
// [New] has nothing to sweep by and returns 0.
func (s *Store) SweepPending(ctx context.Context) (int, error) {
	if s.pendingKV == nil || s.nc == nil {
		return 0, nil
	}
	listing, stop := context.WithCancel(ctx)
	defer stop()
	keys, err := s.pendingKV.ListKeys(listing)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kv: listing the keys of the pending index: %w", err)
	}
	defer func() {
		// The lister's goroutine sends each key unconditionally: on an
		// early return, it is stopped, and what it still sends drained,
		// so that it ends.
		stop()
		for range keys.Keys() {
		}
		_ = keys.Stop()
	}()
	removed := 0
	for key := range keys.Keys() {
		stale, err := s.stalePending(ctx, key)
		if err != nil {
			return removed, err
		}
		if stale == 0 {
			continue
		}
		if s.beforeSweepPurge != nil {
			s.beforeSweepPurge(key)
		}
		err = s.pending.Purge(ctx, key, jetstream.LastRevision(stale), jetstream.PurgeTTL(s.markerTTL))
		switch {
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			// Rewritten since it was read: the engine's, and current.
			continue
		case err != nil:
			return removed, fmt.Errorf("kv: removing pending entry %s of a run that no longer waits: %w", key, err)
		}
		removed++
	}
	if err := ctx.Err(); err != nil {
		return removed, fmt.Errorf("kv: sweeping the pending index: %w", err)
	}
	return removed, nil
}

// stalePending reads the pending entry under key from the pending
// bucket's leader and returns its revision when its run no longer waits
// (finished, or gone), else 0.
func (s *Store) stalePending(ctx context.Context, key string) (uint64, error) {
	doc, rev, err := wire.LeaderKV(ctx, s.nc, s.names.PendingBucket(), key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("kv: reading pending entry %s: %w", key, err)
	}
	var p protocol.Pending
	if err := json.Unmarshal(doc, &p); err != nil || Key(p.Flow, p.Run) != key {
		// Not the engine's: left for whoever wrote it.
		return 0, nil
	}
	cp, _, err := s.Load(ctx, p.Flow, p.Run)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return rev, nil
	case err != nil:
		return 0, fmt.Errorf("kv: reading the checkpoint of pending entry %s: %w", key, err)
	case cp.Status.Finished():
		return rev, nil
	}
	return 0, nil
}

// The header of a KV operation, and its purge (ADR-8, as nats.go writes
// them).
const (
	kvOperation = "KV-Operation"
	kvPurge     = "PURGE"
)

// pendingWriteID is the Nats-Msg-Id of the pending index's write op
// ("put", "del") of key at checkpoint rev.
func pendingWriteID(key string, rev uint64, op string) string {
	return "pending." + op + "." + key + "." + strconv.FormatUint(rev, 10)
}

// PutFinished implements [engine.FinishedIndex]: it appends a finished
// run's entry to the finished-runs index, the stream of its status, on
// <prefix>.finished.<status>.<flow>, with id as its Nats-Msg-Id (a repeat
// within the deduplication window is dropped) and the finished-run
// retention as its TTL: the entry goes when the checkpoint the same
// transition wrote goes. A store made with New keeps no such index.
func (s *Store) PutFinished(ctx context.Context, id string, f *engine.Finished) error {
	if s.names.Prefix == "" {
		return nil
	}
	status := string(f.Status)
	if !slices.Contains(wire.FinishedStatuses, status) {
		return fmt.Errorf("kv: finished-runs index entry of %s has status %q; a finished run is %s", Key(f.Flow, f.Run), status, strings.Join(wire.FinishedStatuses, ", "))
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("kv: encoding the finished-runs index entry of %s: %w", Key(f.Flow, f.Run), err)
	}
	m := nats.NewMsg(s.names.Finished(status, f.Flow))
	m.Data = b
	m.Header.Set("Content-Type", "application/json")
	m.Header.Set(jetstream.MsgIDHeader, id)
	var opts []jetstream.PublishOpt
	if s.keepFinished > 0 {
		opts = append(opts, jetstream.WithMsgTTL(s.keepFinished))
	}
	if _, err := s.pub.PublishMsg(ctx, m, opts...); err != nil {
		return fmt.Errorf("kv: writing the finished-runs index entry of %s: %w", Key(f.Flow, f.Run), err)
	}
	return nil
}
