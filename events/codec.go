package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/interlockhq/interlock/protocol"
)

// Reasons name why an inbound message was not accepted. They are used as the
// last token of the dead-letter subject and as the refusal code where one fits.
const (
	// ReasonUnparseable: the message is not a CloudEvent in either mode.
	ReasonUnparseable = "unparseable"
	// ReasonInvalidPayload: a CloudEvent whose attributes or data break the
	// protocol (missing or mistyped fields, wrong type for the subject).
	ReasonInvalidPayload = "invalid_payload"
)

// Error is a decoding or parsing failure. Reason is one of the Reason
// constants; Field, when set, is the attribute or data field at fault.
type Error struct {
	Reason string
	Field  string
	Msg    string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("events: %s: %s", e.Field, e.Msg)
	}
	return "events: " + e.Msg
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Reason: ReasonInvalidPayload, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// MaxSize is the largest message body Decode accepts.
const MaxSize = 1 << 20

// Decode reads a CloudEvent from a message's headers and body.
//
// A message whose headers carry ce-specversion is read in binary mode: the
// attributes come from ce- headers and the body is the data. Otherwise the body
// is read as a structured-mode event, whether or not its content type says
// application/cloudevents+json, so that a hand-typed `nats pub` works too.
// The event is validated against CloudEvents 1.0; its data, when present, must
// be JSON.
func Decode(header map[string][]string, body []byte) (Event, error) {
	if len(body) > MaxSize {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: fmt.Sprintf("message body is %d bytes, more than the %d allowed", len(body), MaxSize)}
	}
	var (
		ev  Event
		err error
	)
	if headerValue(header, "ce-specversion") != "" {
		ev, err = decodeBinary(header, body)
	} else {
		ev, err = decodeStructured(header, body)
	}
	if err != nil {
		return Event{}, err
	}
	if err := ev.Validate(); err != nil {
		return Event{}, &Error{Reason: ReasonInvalidPayload, Msg: "not a valid CloudEvent: " + strings.TrimSpace(err.Error())}
	}
	if ev.SpecVersion() != event.CloudEventsVersionV1 {
		return Event{}, invalid("specversion", "is %q; Interlock speaks CloudEvents 1.0, set it to \"1.0\"", ev.SpecVersion())
	}
	if ct := ev.DataMediaType(); ct != "" && ct != JSON && !strings.HasSuffix(ct, "+json") {
		return Event{}, invalid("datacontenttype", "is %q; event data must be JSON (application/json)", ev.DataContentType())
	}
	if d := ev.Data(); len(d) > 0 && !json.Valid(d) {
		return Event{}, invalid("data", "is not valid JSON")
	}
	return ev, nil
}

// duplicateKeys refuses a body in which one object has a key twice.
func duplicateKeys(body []byte, where string) error {
	err := checkDuplicateKeys(body)
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		return invalid(where, "%v", err)
	}
	return nil
}

func decodeStructured(header map[string][]string, body []byte) (Event, error) {
	if ct := headerValue(header, "content-type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt != Structured && mt != JSON {
			return Event{}, &Error{Reason: ReasonUnparseable, Msg: fmt.Sprintf("content type %q is neither a structured CloudEvent (%s) nor binary mode (ce-specversion header missing)", ct, Structured)}
		}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: "body is not a JSON object and no ce-specversion header is set: send a structured CloudEvent (application/cloudevents+json) or use binary mode with ce- headers"}
	}
	if ordinary(trimmed) {
		// What the checks below find out, one pass found: valid JSON, no
		// key twice, a "specversion" string. sdk-go reads it as
		// json.Unmarshal would, without checking the JSON again.
		var ev Event
		if err := ev.UnmarshalJSON(trimmed); err != nil {
			return Event{}, &Error{Reason: ReasonInvalidPayload, Msg: "structured CloudEvent does not decode: " + err.Error()}
		}
		return noBase64(ev)
	}
	var probe struct {
		SpecVersion *string `json:"specversion"`
	}
	if err := json.Unmarshal(trimmed, &probe); err != nil {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: "body is not valid JSON: " + err.Error()}
	}
	if probe.SpecVersion == nil {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: "body has no \"specversion\": it is plain JSON, not a CloudEvent; wrap it as {\"specversion\":\"1.0\",\"id\":...,\"source\":...,\"type\":...,\"data\":{...}}"}
	}
	if err := duplicateKeys(trimmed, "event"); err != nil {
		return Event{}, err
	}
	var ev Event
	if err := json.Unmarshal(trimmed, &ev); err != nil {
		return Event{}, &Error{Reason: ReasonInvalidPayload, Msg: "structured CloudEvent does not decode: " + err.Error()}
	}
	return noBase64(ev)
}

// noBase64 refuses an event carrying binary data.
func noBase64(ev Event) (Event, error) {
	if ev.DataBase64 {
		return Event{}, invalid("data_base64", "binary data is not accepted; put JSON in \"data\"")
	}
	return ev, nil
}

// ordinary reports whether a structured event's body passes the checks of
// decodeStructured: valid JSON within encoding/json's nesting limit, no
// key twice in one object, and one top-level member matching
// "specversion" as encoding/json matches names (without regard to case),
// spelled so, with a string value. The checks' errors are only ever given
// for a body that is not ordinary.
func ordinary(body []byte) bool {
	exact, other := 0, 0
	s := scanner{data: body, top: func(key []byte, value byte) {
		if !bytes.EqualFold(key, []byte("specversion")) {
			return
		}
		if string(key) == "specversion" && value == '"' {
			exact++
		} else {
			other++
		}
	}}
	s.scan()
	return s.valid && !s.repeated && exact == 1 && other == 0
}

func decodeBinary(header map[string][]string, body []byte) (Event, error) {
	ev := event.New(headerValue(header, "ce-specversion"))
	if ev.Context == nil {
		return Event{}, invalid("ce-specversion", "is %q; Interlock speaks CloudEvents 1.0, set it to \"1.0\"", headerValue(header, "ce-specversion"))
	}
	for name, values := range header {
		if len(values) == 0 {
			continue
		}
		lower := strings.ToLower(name)
		if !strings.HasPrefix(lower, "ce-") {
			continue
		}
		attr := lower[len("ce-"):]
		v := values[0]
		switch attr {
		case "specversion":
		case "id":
			ev.SetID(v)
		case "source":
			ev.SetSource(v)
		case "type":
			ev.SetType(v)
		case "subject":
			ev.SetSubject(v)
		case "dataschema":
			ev.SetDataSchema(v)
		case "datacontenttype":
			ev.SetDataContentType(v)
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return Event{}, invalid("ce-time", "%q is not an RFC 3339 timestamp", v)
			}
			ev.SetTime(t)
		default:
			if err := ev.Context.SetExtension(attr, v); err != nil {
				return Event{}, invalid("ce-"+attr, "is not a valid extension attribute: %v", err)
			}
		}
	}
	if ct := headerValue(header, "content-type"); ct != "" && ev.DataContentType() == "" {
		ev.SetDataContentType(ct)
	}
	if len(body) > 0 {
		if err := duplicateKeys(body, "data"); err != nil {
			return Event{}, err
		}
		if ev.DataContentType() == "" {
			ev.SetDataContentType(JSON)
		}
		ev.DataEncoded = append([]byte(nil), body...)
	}
	return ev, nil
}

// headerValue returns the first value of a header, matching its name without
// regard to case, as NATS headers are case-sensitive maps.
func headerValue(header map[string][]string, name string) string {
	if v, ok := header[name]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range header {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0]
		}
	}
	return ""
}

// New returns a CloudEvents 1.0 event with JSON data. data may be a
// json.RawMessage holding encoded JSON, or any value json.Marshal accepts.
func New(id, source, typ, subject string, at time.Time, data any) (Event, error) {
	ev := event.New(event.CloudEventsVersionV1)
	ev.SetID(id)
	ev.SetSource(source)
	ev.SetType(typ)
	if subject != "" {
		ev.SetSubject(subject)
	}
	ev.SetTime(at)
	if raw, ok := data.(json.RawMessage); ok {
		ev.SetDataContentType(JSON)
		ev.DataEncoded = raw
		return ev, nil
	}
	if err := ev.SetData(JSON, data); err != nil {
		return Event{}, fmt.Errorf("events: encoding data of %s event %q: %w", typ, id, err)
	}
	return ev, nil
}

// Outbound returns an event Interlock publishes: data (a typed value, or a
// json.RawMessage) under type typ, with the run as subject, the flow as the
// flow extension and, when set, the W3C traceparent carried from the event
// that started or resumed the run.
func Outbound(id, source, typ, flow, run, traceparent string, at time.Time, data any) (Event, error) {
	ev, err := New(id, source, typ, run, at, data)
	if err != nil {
		return Event{}, err
	}
	ev.SetExtension(protocol.ExtFlow, flow)
	if traceparent != "" {
		ev.SetExtension(protocol.ExtTraceparent, traceparent)
	}
	return ev, nil
}

// StringExtension returns the extension attribute name of ev as a string, or
// "" when it is absent or not a string.
func StringExtension(ev Event, name string) string {
	v, ok := ev.Extensions()[name]
	if !ok {
		return ""
	}
	s, _ := v.(string)
	return s
}

// Peek reads what it can of a message that did not decode: the event id and
// subject (the run id), from ce- headers or from a JSON body's top-level
// "id" and "subject". Either may be "". It never fails.
func Peek(header map[string][]string, body []byte) (id, subject string) {
	id, subject = headerValue(header, "ce-id"), headerValue(header, "ce-subject")
	if id != "" && subject != "" || len(body) > MaxSize {
		return id, subject
	}
	var probe struct {
		ID      any `json:"id"`
		Subject any `json:"subject"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &probe) == nil {
		if s, ok := probe.ID.(string); ok && id == "" {
			id = s
		}
		if s, ok := probe.Subject.(string); ok && subject == "" {
			subject = s
		}
	}
	return id, subject
}
