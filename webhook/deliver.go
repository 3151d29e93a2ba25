package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

// UserAgent is the User-Agent of every webhook request.
const UserAgent = "Interlock-Webhooks/1"

// maxDrain is how much of a receiver's answer is read (and dropped) so
// that the connection is kept.
const maxDrain = 64 << 10

// recordTimeout bounds writing a delivery's record.
const recordTimeout = 5 * time.Second

// deliver makes one attempt to deliver d to r's receiver.
func (s *Service) deliver(ctx context.Context, r *running, d notify.Delivery) error {
	sub := r.sub
	if len(sub.Roles) > 0 {
		ok, err := s.forRoles(ctx, d, sub.Roles)
		if err != nil {
			return err
		}
		if !ok {
			return nil // not an event for these roles
		}
	}
	id := ID(sub.Name, d.Event.ID())
	sentKey := notify.Key("webhook-"+sub.Name, id)
	if done, err := s.sent.Done(ctx, sentKey); err != nil {
		return err
	} else if done {
		return nil // delivered before the event was acknowledged
	}
	var callback string
	if sub.Callbacks && s.cfg.CallbackURL != nil && d.Kind == protocol.EventInterrupted {
		flow := events.StringExtension(d.Event, protocol.ExtFlow)
		rq, expires := requestID(d.Event.Data())
		u, err := s.cfg.CallbackURL(ctx, sub.Name, sub.CallbacksAs, flow, d.Event.Subject(), rq, expires)
		if err != nil {
			return fmt.Errorf("making the callback URL: %w", err)
		}
		callback = u
	}
	body, err := payload(d.Event, callback)
	if err != nil {
		return notify.Permanent(err)
	}
	start := time.Now()
	code, err := s.post(ctx, sub, r.key, id, body)
	took := time.Since(start)
	status := StatusDelivered
	switch {
	case err == nil:
		if merr := s.sent.Mark(ctx, sentKey, "HTTP "+strconv.Itoa(code)); merr != nil {
			s.log.Warn().Err(merr).Str("subscription", sub.Name).Str("webhook_id", id).Msg("webhooks: delivered, but not recorded as sent; a redelivery would send it again with the same webhook-id")
		}
	case code == http.StatusGone:
		err = notify.Permanent(err)
		status = StatusDead
	case notify.IsPermanent(err), d.Last:
		status = StatusDead
	default:
		status = StatusRetrying
	}
	s.record(sub, id, d, status, code, err)
	if s.cfg.Observe != nil {
		s.cfg.Observe(Attempt{Subscription: sub.Name, Status: status, HTTPStatus: code, Took: took})
	}
	return err
}

// post sends body to sub's receiver, signed, and returns the status code
// (0 when no answer came) and, unless it was 2xx, why it failed: for
// good (notify.Permanent) when the outbound policy refused the receiver's
// address. Errors name the URL without its query or user information.
func (s *Service) post(ctx context.Context, sub Subscription, key []byte, id string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sub.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", Redact(sub.URL), unwrapURL(err))
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(key, id, now, body))
	resp, err := s.client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return 0, notify.Permanent(fmt.Errorf("POST %s: %w", Redact(sub.URL), refused))
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return 0, fmt.Errorf("POST %s: no answer within %s", Redact(sub.URL), sub.Timeout)
		}
		return 0, fmt.Errorf("POST %s: %w", Redact(sub.URL), unwrapURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode == http.StatusGone:
		return resp.StatusCode, fmt.Errorf("POST %s: HTTP %s: the receiver is gone for good", Redact(sub.URL), resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("POST %s: HTTP %s: redirects are not followed; give the subscription the URL it redirects to", Redact(sub.URL), resp.Status)
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable:
		// The receiver says when to come back: the next attempt waits
		// that long (within retryFor), not the back-off.
		err := fmt.Errorf("POST %s: HTTP %s", Redact(sub.URL), resp.Status)
		return resp.StatusCode, notify.RetryAfter(err, notify.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	}
	return resp.StatusCode, fmt.Errorf("POST %s: HTTP %s", Redact(sub.URL), resp.Status)
}

// markDead records a delivery the follower dead-lettered as dead, if its
// last attempt's record says otherwise.
func (s *Service) markDead(sub Subscription, d notify.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	id := ID(sub.Name, d.Event.ID())
	rec, err := s.records.get(ctx, recordKey(sub.Name, id))
	if err != nil || rec.First.IsZero() || rec.Status == StatusDead {
		return
	}
	rec.Status, rec.Attempts = StatusDead, max(rec.Attempts, d.Attempt)
	if perr := s.records.put(ctx, rec); perr != nil {
		s.log.Warn().Err(perr).Str("subscription", sub.Name).Str("webhook_id", id).Msg("webhooks: the dead delivery's record was not written")
	}
}

// unwrapURL drops the *url.Error around err: it repeats the whole URL,
// query included.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// record writes the attempt to the delivery's record. A record that
// cannot be written is logged: the delivery itself is what counts.
func (s *Service) record(sub Subscription, id string, d notify.Delivery, status string, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	now := time.Now().UTC()
	rec, gerr := s.records.get(ctx, recordKey(sub.Name, id))
	if gerr != nil || rec.First.IsZero() {
		rec = Delivery{First: now}
	}
	rec.Subscription, rec.WebhookID = sub.Name, id
	rec.EventID, rec.Type, rec.Run = d.Event.ID(), d.Event.Type(), d.Event.Subject()
	rec.Flow = events.StringExtension(d.Event, protocol.ExtFlow)
	rec.Status, rec.Attempts, rec.HTTPStatus, rec.Last = status, d.Attempt, code, now
	rec.URL = Redact(sub.URL)
	rec.Error = ""
	if err != nil {
		rec.Error = err.Error()
	}
	if perr := s.records.put(ctx, rec); perr != nil {
		s.log.Warn().Err(perr).Str("subscription", sub.Name).Str("webhook_id", id).Msg("webhooks: the delivery's record was not written")
	}
}

// forRoles reports whether d is an event of one of roles: its data's
// approverRole, or, for an event that names none (resumed, expired,
// cancelled, completed, failed), a run that waited on one of roles, as
// its audit records say. A subscription of a role's approvals then hears
// how they ended.
func (s *Service) forRoles(ctx context.Context, d notify.Delivery, roles []string) (bool, error) {
	if role := approverRole(d.Event.Data()); role != "" {
		return slices.Contains(roles, role), nil
	}
	flow, run := events.StringExtension(d.Event, protocol.ExtFlow), d.Event.Subject()
	if flow == "" || run == "" {
		return false, nil
	}
	stream, err := s.js.Stream(ctx, s.names.AuditStream())
	if err != nil {
		return false, fmt.Errorf("reading the audit of %s %s for the subscription's roles: %w", flow, run, err)
	}
	subject := s.names.Audit(flow, run)
	for seq, n := uint64(1), 0; n < maxRoleRecords; n++ {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading the audit of %s %s for the subscription's roles: %w", flow, run, err)
		}
		seq = m.Sequence + 1
		ev, err := events.Decode(m.Header, m.Data)
		if err != nil {
			continue
		}
		rec, err := protocol.DecodeAuditRecord(ev.Data())
		if err != nil {
			continue
		}
		if slices.Contains(roles, rec.ApproverRole) || rec.Outcome != nil && slices.Contains(roles, rec.Outcome.ApproverRole) {
			return true, nil
		}
	}
	return false, nil
}

// maxRoleRecords bounds the audit records read to find a run's roles.
const maxRoleRecords = 1000
