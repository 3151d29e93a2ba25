package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// Headers of a message waiting in the holding stream: the subject it was
// sent to, its Nats-Msg-Id, and, for a deadline, its schedule (kept under
// names no JetStream feature acts on).
const (
	headerMigratedFrom     = "Interlock-Migrated-From"
	headerMigratedMsgID    = "Interlock-Migrated-Msg-Id"
	headerMigratedSchedule = "Interlock-Migrated-Schedule"
)

// holdingStream keeps an earlier inbound stream's commands and deadlines
// while the inbound stream is made anew.
func holdingStream(n wire.Names) string { return n.InStream() + "_MIGRATING" }

// migrateInbound empties an inbound stream made by an earlier version of
// Interlock, which held the deadlines of interrupts as message schedules
// (and so allowed roll-ups, which a schedule needs), into a holding
// stream, and deletes it: a server never turns message schedules off again,
// so the stream is made anew (Provision creates it, then [restoreHeld]
// puts its messages back). In order:
//
//  1. Its deadlines are copied to the holding stream, then purged from it,
//     so that none fires while it moves (one that fired before is a
//     command in it by then).
//  2. Its subjects change to one no client publishes to: a command sent
//     from then on fails at once (no stream answers), rather than being
//     acknowledged and lost.
//  3. Its commands are copied to the holding stream, in order, and it is
//     deleted.
//
// Every step may be repeated (the copies are deduplicated by message id,
// and a deadline put back replaces the one on its subject), so a process
// stopped half-way finishes the move at its next start.
func migrateInbound(ctx context.Context, js jetstream.JetStream, n wire.Names, w clusterWait) error {
	var st jetstream.Stream
	// While a cluster forms the stream may not be found yet: ask as
	// Provision does, until the cluster answers.
	if err := w.do(ctx, "stream "+n.InStream(), func(ctx context.Context) error {
		s, err := js.Stream(ctx, n.InStream())
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		st = s
		return err
	}); err != nil {
		return err
	}
	if st == nil || !st.CachedInfo().Config.AllowMsgSchedules {
		return nil
	}
	old := st.CachedInfo().Config
	w.cfg.Logger.Warn().Str("stream", n.InStream()).Msg("moving the inbound stream of an earlier version: its deadlines to " +
		n.ScheduleStream() + ", and the stream made anew without message schedules and roll-ups")
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: holdingStream(n), Subjects: []string{n.Prefix + ".migrating.>"},
		Description: "Interlock commands and deadlines waiting while " + n.InStream() + " is made anew",
		Storage:     old.Storage, Replicas: old.Replicas, Duplicates: cmp.Or(old.Duplicates, DefaultDuplicates),
	}); err != nil {
		return fmt.Errorf("bus: creating holding stream %s: %w", holdingStream(n), err)
	}
	schedules := n.Prefix + ".schedule.>"
	if slicesContains(old.Subjects, schedules) {
		if err := holdAll(ctx, js, n, st, schedules); err != nil {
			return err
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(schedules)); err != nil {
			return fmt.Errorf("bus: purging the deadlines of %s once held: %w", n.InStream(), err)
		}
	}
	closed := old
	closed.Subjects = []string{n.Prefix + ".migrating-in.>"}
	if _, err := js.UpdateStream(ctx, closed); err != nil {
		return fmt.Errorf("bus: closing stream %s to new commands before moving it: %w", n.InStream(), err)
	}
	if err := holdAll(ctx, js, n, st, ""); err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, n.InStream()); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: deleting stream %s to make it anew: %w", n.InStream(), err)
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// holdAll copies the messages of st (those on filter, or every one) to the
// holding stream, in order. It reads by message get: a work-queue stream
// takes no second consumer.
func holdAll(ctx context.Context, js jetstream.JetStream, n wire.Names, st jetstream.Stream, filter string) error {
	return each(ctx, st, filter, func(msg *jetstream.RawStreamMsg) error {
		out := nats.NewMsg(n.Prefix + ".migrating." + strconv.FormatUint(msg.Sequence, 10))
		out.Data = msg.Data
		for k, vs := range msg.Header {
			switch {
			case strings.HasPrefix(k, "Nats-Schedule"):
				// A schedule: kept under a name the holding stream does
				// not act on.
				out.Header[headerMigratedSchedule+strings.TrimPrefix(k, "Nats-Schedule")] = vs
			case k == "Nats-Rollup":
			default:
				out.Header[k] = vs
			}
		}
		id := "migrate-" + strconv.FormatUint(msg.Sequence, 10)
		out.Header.Set(headerMigratedFrom, msg.Subject)
		out.Header.Set(headerMigratedMsgID, cmp.Or(out.Header.Get(jetstream.MsgIDHeader), id))
		out.Header.Set(jetstream.MsgIDHeader, id)
		if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(holdingStream(n))); err != nil {
			return fmt.Errorf("bus: moving message %d of %s to %s: %w", msg.Sequence, n.InStream(), holdingStream(n), err)
		}
		return nil
	})
}

// each calls do for every message of st on filter ("" for every one), in
// order, reading them one by one.
func each(ctx context.Context, st jetstream.Stream, filter string, do func(*jetstream.RawStreamMsg) error) error {
	var opts []jetstream.GetMsgOpt
	if filter != "" {
		opts = append(opts, jetstream.WithGetMsgSubject(filter))
	} else {
		opts = append(opts, jetstream.WithGetMsgSubject(">"))
	}
	for seq := uint64(1); ; {
		msg, err := st.GetMsg(ctx, seq, opts...)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bus: reading stream %s: %w", st.CachedInfo().Config.Name, err)
		}
		if err := do(msg); err != nil {
			return err
		}
		seq = msg.Sequence + 1
	}
}

// restoreHeld puts the messages of the holding stream back, in order, and
// deletes it: deadlines into the schedule stream, aimed at the due subject;
// commands into the inbound stream (a deadline that had fired, an expire
// command, onto its due subject). Without a holding stream it does
// nothing. The inbound and schedule streams must exist.
func restoreHeld(ctx context.Context, js jetstream.JetStream, n wire.Names, w clusterWait) error {
	var hold jetstream.Stream
	if err := w.do(ctx, "stream "+holdingStream(n), func(ctx context.Context) error {
		s, err := js.Stream(ctx, holdingStream(n))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		hold = s
		return err
	}); err != nil || hold == nil {
		return err
	}
	info, err := hold.Info(ctx)
	if err != nil {
		return fmt.Errorf("bus: reading holding stream %s: %w", holdingStream(n), err)
	}
	if err := each(ctx, hold, "", func(msg *jetstream.RawStreamMsg) error { return restoreOne(ctx, js, n, msg) }); err != nil {
		return err
	}
	w.cfg.Logger.Info().Str("stream", n.InStream()).Uint64("messages", info.State.Msgs).Msg("inbound stream made anew; its commands and deadlines are back")
	if err := js.DeleteStream(ctx, holdingStream(n)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: deleting holding stream %s: %w", holdingStream(n), err)
	}
	return nil
}

// restoreOne puts one held message back where it now belongs.
func restoreOne(ctx context.Context, js jetstream.JetStream, n wire.Names, msg *jetstream.RawStreamMsg) error {
	from := msg.Header.Get(headerMigratedFrom)
	out := nats.NewMsg(from)
	out.Data = msg.Data
	schedule := false
	for k, vs := range msg.Header {
		switch {
		case strings.HasPrefix(k, headerMigratedSchedule):
			out.Header["Nats-Schedule"+strings.TrimPrefix(k, headerMigratedSchedule)] = vs
			schedule = true
		case k == headerMigratedFrom || k == headerMigratedMsgID || k == jetstream.MsgIDHeader:
		default:
			out.Header[k] = vs
		}
	}
	stream := n.InStream()
	switch flow, verb, ok := n.ParseIn(from); {
	case schedule:
		// The target was <prefix>.in.<flow>.expire. A deadline replaces
		// the one on its subject: putting it back twice is once.
		f, v, ok := n.ParseIn(out.Header.Get(HeaderScheduleTarget))
		if !ok {
			return nil
		}
		out.Header.Set(HeaderScheduleTarget, n.Due(f, v))
		stream = n.ScheduleStream()
	case ok && verb == "expire":
		out.Subject = n.Due(flow, verb)
		out.Header.Set(jetstream.MsgIDHeader, msg.Header.Get(headerMigratedMsgID))
		stream = n.ScheduleStream()
	default:
		out.Header.Set(jetstream.MsgIDHeader, msg.Header.Get(headerMigratedMsgID))
	}
	if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(stream)); err != nil {
		return fmt.Errorf("bus: putting back %s from %s: %w", from, holdingStream(n), err)
	}
	return nil
}
