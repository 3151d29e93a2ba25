package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Headers Interlock sets on dead letters. The original message's headers
// are kept under HeaderOriginal, so that none acts on the dead-letter
// stream.
const (
	// HeaderReason is the dead-letter reason, also the subject's last token.
	HeaderReason = "Interlock-Reason"
	// HeaderError says what was wrong, for a person.
	HeaderError = "Interlock-Error"
	// HeaderSubject is the subject the message was sent to.
	HeaderSubject = "Interlock-Subject"
	// HeaderStreamSeq is the message's sequence in the inbound stream.
	HeaderStreamSeq = "Interlock-Stream-Seq"
	// HeaderConsumer names the consumer that could not deliver an event
	// (a channel: mail, a webhook subscription, Teams); inbound commands
	// have none.
	HeaderConsumer = "Interlock-Consumer"
	// HeaderOriginal prefixes each header of the original message, every
	// value kept: its Content-Type is Interlock-Original-Content-Type, its
	// Nats-Msg-Id Interlock-Original-Nats-Msg-Id. No NATS feature acts on
	// a header so named, so a dead letter always stores, and a replay
	// takes the prefix off.
	HeaderOriginal = "Interlock-Original-"
	// HeaderDropped names the original headers a dead letter does not
	// keep, comma-separated: Interlock-Vouch (a credential of the
	// deployment's services), and headers that did not fit in one message.
	HeaderDropped = "Interlock-Dropped"
	// HeaderTruncated is set when the dead letter holds only the
	// beginning of the body, to the size of the whole body in bytes.
	HeaderTruncated = "Interlock-Truncated"
	// HeaderBodySHA256 is the SHA-256, in hex, of the whole body as it
	// was received, set with HeaderTruncated: it tells the message apart
	// from another with the same beginning.
	HeaderBodySHA256 = "Interlock-Body-Sha256"
)

// maxDetail bounds the Interlock-Error of a dead letter.
const maxDetail = 4 << 10

// DeadLetter copies an inbound message to interlock.dlq.<reason>, with
// the reason, the error, the original subject and stream sequence in
// headers of its own, and the original headers under HeaderOriginal.
//
// A dead letter never holds a credential: resume tokens in the body, and
// every header that may carry a credential (events.CredentialHeader: a
// resume token, Authorization, a cookie, an API key, ...) are redacted,
// and Interlock-Vouch is dropped. It always fits in one message (the connection's MaxPayload,
// and JetStream's 64 KiB of headers): what does not fit of the original
// headers is dropped, and of the body, redacted first, only the beginning
// is kept (HeaderTruncated, HeaderBodySHA256). So a dead letter fails to
// store only when the stream cannot be written at all.
func DeadLetter(ctx context.Context, js JetStream, n wire.Names, msg jetstream.Msg, reason, detail string) error {
	dl := nats.NewMsg(n.DeadLetter(reason))
	h := dl.Header
	h.Set(HeaderReason, reason)
	h.Set(HeaderError, cut(detail, maxDetail))
	h.Set(HeaderSubject, msg.Subject())
	if md, err := msg.Metadata(); err == nil {
		h.Set(HeaderStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
		id := fmt.Sprintf("dlq-%s-%d", md.Stream, md.Sequence.Stream)
		if md.Stream != n.InStream() {
			// An event is dead-lettered by each channel that could not
			// deliver it: one dead letter per channel.
			h.Set(HeaderConsumer, md.Consumer)
			id += "-" + md.Consumer
		}
		h.Set(jetstream.MsgIDHeader, id)
	}
	limit := maxPayload(js)
	// Room kept for the headers that say what was dropped or truncated.
	const reserve = 2 * (maxDropped + 128)
	headerRoom := min(limit, maxHeaders)
	var dropped []string
	size := headerSize(h)
	orig := msg.Headers()
	for _, k := range slices.Sorted(maps.Keys(orig)) {
		if strings.EqualFold(k, protocol.HeaderVouch) {
			dropped = append(dropped, k)
			continue
		}
		var add []string
		for _, v := range orig[k] {
			if events.CredentialHeader(k) {
				v = events.Redacted
			} else {
				v = string(events.RedactTokens([]byte(v)))
			}
			add = append(add, v)
		}
		line := lineSize(HeaderOriginal+k, add)
		if size+line+reserve > headerRoom {
			dropped = append(dropped, k)
			continue
		}
		size += line
		for _, v := range add {
			h.Add(HeaderOriginal+k, v)
		}
	}
	if len(dropped) > 0 {
		h.Set(HeaderDropped, cut(strings.Join(dropped, ", "), maxDropped))
	}
	body := events.RedactTokens(msg.Data())
	if room := limit - headerSize(h); len(body) > room {
		whole := msg.Data()
		sum := sha256.Sum256(whole)
		h.Set(HeaderTruncated, strconv.Itoa(len(whole)))
		h.Set(HeaderBodySHA256, hex.EncodeToString(sum[:]))
		body = body[:max(0, limit-headerSize(h))]
	}
	dl.Data = body
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("bus: dead-lettering message from %s: %w", msg.Subject(), err)
	}
	return nil
}

// maxDropped bounds the list of dropped headers.
const maxDropped = 1 << 10

// maxHeaders is the most a JetStream stream takes of a message's headers.
const maxHeaders = math.MaxUint16

// defaultMaxPayload is NATS's default max_payload.
const defaultMaxPayload = 1 << 20

// maxPayload is the largest message the server takes, NATS's default
// when the connection does not know.
func maxPayload(js JetStream) int {
	if nc := js.Conn(); nc != nil {
		if n := nc.MaxPayload(); n > 0 {
			return int(n)
		}
	}
	return defaultMaxPayload
}

// headerSize is the size of h on the wire, as nats.go counts it against
// the server's max_payload.
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		n += lineSize(k, vs)
	}
	return n
}

// lineSize is the size of the header lines of name with values.
func lineSize(name string, values []string) int {
	n := 0
	for _, v := range values {
		n += len(name) + len(textproto.TrimString(v)) + len(": \r\n")
	}
	return n
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("...")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
