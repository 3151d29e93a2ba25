package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LeaderMsg reads one message of stream from the stream's leader, with
// the STREAM.MSG.GET API: the message at seq, or, when lastBySubject is
// set, the last one on that subject. It fails with
// jetstream.ErrMsgNotFound when there is none.
//
// A direct get (what nats.go's Stream.GetMsg and KeyValue.Get send when
// the stream allows them) may be answered by any replica, and on a
// cluster a replica that fell behind (cut off, paused, catching up)
// answers with what it had: a message stored since is not found there,
// and a key shows an older value. A worker that decides from what it reads
// (whether a command is still unacknowledged, what a run's checkpoint
// says) reads the leader instead.
func LeaderMsg(ctx context.Context, nc *nats.Conn, stream string, seq uint64, lastBySubject string) (*jetstream.RawStreamMsg, error) {
	var req struct {
		Seq     uint64 `json:"seq,omitempty"`
		LastFor string `json:"last_by_subj,omitempty"`
	}
	req.Seq, req.LastFor = seq, lastBySubject
	body, _ := json.Marshal(req)
	reply, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Headers []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("the reply of %s's leader is not JetStream's: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, fmt.Errorf("%s's leader replied with no message", stream)
	}
	m := resp.Message
	h, err := decodeHeaders(m.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers of %s #%d: %w", stream, m.Seq, err)
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Header: h, Data: m.Data, Time: m.Time}, nil
}

// LeaderKV reads key of a KV bucket from the leader of the bucket's
// stream (see [LeaderMsg]): its value and revision, or
// jetstream.ErrKeyNotFound when the key has none, or its last message is a
// delete or purge marker, or a marker JetStream left when a TTL ran out.
func LeaderKV(ctx context.Context, nc *nats.Conn, bucket, key string) ([]byte, uint64, error) {
	m, err := LeaderMsg(ctx, nc, "KV_"+bucket, 0, "$KV."+bucket+"."+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, 0, jetstream.ErrKeyNotFound
	case err != nil:
		return nil, 0, err
	case IsKVMarker(m.Header):
		return nil, 0, jetstream.ErrKeyNotFound
	}
	return m.Data, m.Sequence, nil
}

// IsKVMarker reports whether a KV message's headers make it a delete or
// purge marker (KV-Operation), or a marker JetStream left when a
// message's TTL or age ran out.
func IsKVMarker(h nats.Header) bool {
	return h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}

// decodeHeaders decodes a NATS header block ("NATS/1.0\r\nKey: value\r\n\r\n").
func decodeHeaders(b []byte) (nats.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := textproto.NewReader(bufio.NewReader(strings.NewReader(string(b))))
	if _, err := r.ReadLine(); err != nil { // NATS/1.0, maybe a status
		return nil, err
	}
	h := nats.Header{}
	for {
		line, err := r.ReadLine()
		if err != nil || line == "" {
			return h, nil
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		// As sent: NATS header names keep their case.
		h[strings.TrimSpace(k)] = append(h[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
}
