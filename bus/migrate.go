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

	"github.com/interlockhq/interlock/wire"
)

// Headers of a command waiting in the holding stream: the subject it was
// sent to, and its Nats-Msg-Id.
const (
	headerMigratedFrom  = "Interlock-Migrated-From"
	headerMigratedMsgID = "Interlock-Migrated-Msg-Id"
)

// holdingStream keeps an earlier inbound stream's commands while the
// inbound stream is made anew.
func holdingStream(n wire.Names) string { return n.InStream() + "_MIGRATING" }

func holdingSubject(n wire.Names, seq uint64) string {
	return n.Prefix + ".migrating." + strconv.FormatUint(seq, 10)
}

// migrateInbound moves an inbound stream made by an earlier version of
// Interlock, which held the deadlines of interrupts as message schedules
// (and so allowed roll-ups, which a schedule needs), to want, which allows
// neither. A server never turns message schedules off again, so the stream
// is made anew:
//
//  1. Its subjects change to one no client publishes to: a command sent
//     from then on fails at once (no stream answers), rather than being
//     acknowledged and lost.
//  2. Its deadlines move to the schedule stream, aimed at the due subject.
//  3. Its commands move, in order, to a holding stream.
//  4. It is deleted and created again as want; the commands go back, with
//     their headers, in order, and the holding stream is deleted.
//
// Every step may be repeated, so a process stopped half-way finishes the
// move at its next start. The schedule stream must exist.
func migrateInbound(ctx context.Context, js jetstream.JetStream, n wire.Names, want jetstream.StreamConfig, w clusterWait) error {
	hold := holdingStream(n)
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
	if st == nil {
		return restoreHeld(ctx, js, n, want, w)
	}
	old := st.CachedInfo().Config
	if !old.AllowMsgSchedules {
		// A move stopped after the stream was made anew finishes here.
		return restoreHeld(ctx, js, n, want, w)
	}
	w.cfg.Logger.Warn().Str("stream", n.InStream()).Msg("moving the inbound stream of an earlier version: its deadlines to " +
		n.ScheduleStream() + ", and the stream made anew without message schedules and roll-ups")
	closed := old
	closed.Subjects = []string{n.Prefix + ".migrating-in.>"}
	if _, err := js.UpdateStream(ctx, closed); err != nil {
		return fmt.Errorf("bus: closing stream %s to new commands before moving it: %w", n.InStream(), err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: hold, Subjects: []string{n.Prefix + ".migrating.>"},
		Description: "Interlock commands waiting while " + n.InStream() + " is made anew",
		Storage:     old.Storage, Replicas: old.Replicas, Duplicates: old.Duplicates,
	}); err != nil {
		return fmt.Errorf("bus: creating holding stream %s: %w", hold, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("bus: reading stream %s: %w", n.InStream(), err)
	}
	last := st.CachedInfo().State.LastSeq
	for last > 0 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return fmt.Errorf("bus: reading stream %s: %w", n.InStream(), err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("bus: reading stream %s: %w", n.InStream(), err)
		}
		if err := moveMessage(ctx, js, n, msg, md.Sequence.Stream); err != nil {
			return err
		}
		if md.NumPending == 0 || md.Sequence.Stream >= last {
			break
		}
	}
	if err := js.DeleteStream(ctx, n.InStream()); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: deleting stream %s to make it anew: %w", n.InStream(), err)
	}
	return restoreHeld(ctx, js, n, want, w)
}

// moveMessage moves one message of an earlier inbound stream: a deadline
// to the schedule stream, a command to the holding stream.
func moveMessage(ctx context.Context, js jetstream.JetStream, n wire.Names, msg jetstream.Msg, seq uint64) error {
	subject := msg.Subject()
	out := nats.NewMsg(subject)
	out.Data = msg.Data()
	for k, vs := range msg.Headers() {
		out.Header[k] = vs
	}
	if strings.HasPrefix(subject, n.Prefix+".schedule.") {
		// The target was <prefix>.in.<flow>.expire.
		flow, verb, ok := n.ParseIn(out.Header.Get(HeaderScheduleTarget))
		if !ok {
			return nil
		}
		out.Header.Set(HeaderScheduleTarget, n.Due(flow, verb))
		out.Header.Del(jetstream.MsgIDHeader)
		out.Header.Del("Nats-Rollup")
		// A schedule replaces the one on its subject: moving it twice is
		// moving it once.
		if _, err := js.PublishMsg(ctx, out); err != nil {
			return fmt.Errorf("bus: moving deadline %s to %s: %w", subject, n.ScheduleStream(), err)
		}
		return nil
	}
	if !strings.HasPrefix(subject, n.Prefix+".in.") {
		return nil
	}
	id := "migrate-" + strconv.FormatUint(seq, 10)
	out.Subject = holdingSubject(n, seq)
	out.Header.Set(headerMigratedFrom, subject)
	out.Header.Set(headerMigratedMsgID, cmp.Or(out.Header.Get(jetstream.MsgIDHeader), id))
	out.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(holdingStream(n))); err != nil {
		return fmt.Errorf("bus: moving command %d of %s to %s: %w", seq, n.InStream(), holdingStream(n), err)
	}
	return nil
}

// restoreHeld creates the inbound stream as want, if it is missing, and
// puts back the commands of the holding stream, in order, then deletes it.
// Without a holding stream it only creates the stream.
func restoreHeld(ctx context.Context, js jetstream.JetStream, n wire.Names, want jetstream.StreamConfig, w clusterWait) error {
	if err := w.do(ctx, "stream "+want.Name, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, want)
		return err
	}); err != nil {
		return err
	}
	var hold jetstream.Stream
	if err := w.do(ctx, "stream "+holdingStream(n), func(ctx context.Context) error {
		s, err := js.Stream(ctx, holdingStream(n))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		hold = s
		return err
	}); err != nil {
		return err
	}
	if hold == nil {
		return nil
	}
	info, err := hold.Info(ctx)
	if err != nil {
		return fmt.Errorf("bus: reading holding stream %s: %w", holdingStream(n), err)
	}
	if info.State.Msgs > 0 {
		cons, err := hold.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return fmt.Errorf("bus: reading holding stream %s: %w", holdingStream(n), err)
		}
		for {
			msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				return fmt.Errorf("bus: reading holding stream %s: %w", holdingStream(n), err)
			}
			out := nats.NewMsg(msg.Headers().Get(headerMigratedFrom))
			out.Data = msg.Data()
			for k, vs := range msg.Headers() {
				out.Header[k] = vs
			}
			out.Header.Set(jetstream.MsgIDHeader, msg.Headers().Get(headerMigratedMsgID))
			out.Header.Del(headerMigratedFrom)
			out.Header.Del(headerMigratedMsgID)
			if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(n.InStream())); err != nil {
				return fmt.Errorf("bus: putting back command %s of %s: %w", msg.Headers().Get(jetstream.MsgIDHeader), holdingStream(n), err)
			}
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("bus: reading holding stream %s: %w", holdingStream(n), err)
			}
			if md.NumPending == 0 {
				break
			}
		}
	}
	w.cfg.Logger.Info().Str("stream", n.InStream()).Uint64("commands", info.State.Msgs).Msg("inbound stream made anew; its commands are back")
	if err := js.DeleteStream(ctx, holdingStream(n)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: deleting holding stream %s: %w", holdingStream(n), err)
	}
	return nil
}
