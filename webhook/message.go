package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ID is the webhook-id of an event delivered to a subscription: the same
// on every attempt, so that a receiver drops a repeat, and distinct per
// subscription, so that two subscriptions to one receiver are not taken
// for repeats of each other.
func ID(subscription, eventID string) string {
	sum := sha256.Sum256([]byte(subscription + "\x00" + eventID))
	return "msg_" + hex.EncodeToString(sum[:16])
}

// Sign returns the webhook-signature of a message, by the Standard
// Webhooks scheme: "v1," and the base64 HMAC-SHA256, under key, of
// id.timestamp.body with timestamp in Unix seconds.
func Sign(key []byte, id string, at time.Time, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Payload is the JSON body of a webhook, in the Standard Webhooks shape
// (type, timestamp, data) with the run it is about.
type Payload struct {
	// Type is the CloudEvent type, e.g. io.interlock.run.interrupted.
	Type string `json:"type"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// EventID is the CloudEvent id.
	EventID string `json:"eventId"`
	// Flow and Run name the run (for a tool call, flow "gate" and the call).
	Flow string `json:"flow,omitempty"`
	Run  string `json:"run,omitempty"`
	// CallbackURL settles an interrupted event's interrupt with a POST of
	// the resume body, when the subscription asks for callbacks.
	CallbackURL string `json:"callbackUrl,omitempty"`
	// Data is the event's data, without its resume token.
	Data json.RawMessage `json:"data"`
}

// payload builds the body delivered for ev: its data with every resume
// token taken out, which never leaves for a third party.
func payload(ev events.Event, callbackURL string) ([]byte, error) {
	data, err := withoutTokens(ev.Data())
	if err != nil {
		return nil, fmt.Errorf("webhooks: event %s: %w", ev.ID(), err)
	}
	p := Payload{
		Type: ev.Type(), Timestamp: ev.Time().UTC(), EventID: ev.ID(),
		Flow: events.StringExtension(ev, protocol.ExtFlow), Run: ev.Subject(),
		CallbackURL: callbackURL, Data: data,
	}
	return json.Marshal(p)
}

// withoutTokens returns data (a JSON object) without its resumeToken
// member, and any resume token deeper in it redacted.
func withoutTokens(data []byte) (json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		if !json.Valid(data) {
			return nil, fmt.Errorf("the data is not JSON: %w", err)
		}
		return json.RawMessage(events.RedactTokens(data)), nil
	}
	for k, v := range obj {
		if isTokenKey(k) {
			delete(obj, k)
			continue
		}
		obj[k] = events.RedactTokens(v)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// isTokenKey reports whether a member holds a resume token, as
// encoding/json would match it (any letter case).
func isTokenKey(k string) bool {
	k = strings.ToLower(k)
	return k == "resumetoken" || k == "resume_token"
}

// approverRole is the approverRole of an event's data, or "".
func approverRole(data []byte) string {
	var v struct {
		ApproverRole string `json:"approverRole"`
	}
	_ = json.Unmarshal(data, &v)
	return v.ApproverRole
}

// requestID is the requestId of an event's data ("" if none), and its
// expiresAt (zero if none).
func requestID(data []byte) (string, time.Time) {
	var v struct {
		RequestID string     `json:"requestId"`
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	_ = json.Unmarshal(data, &v)
	if v.ExpiresAt == nil {
		return v.RequestID, time.Time{}
	}
	return v.RequestID, *v.ExpiresAt
}
