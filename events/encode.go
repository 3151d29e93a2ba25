package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/interlockhq/interlock/protocol"
)

// Encode returns ev as a structured-mode CloudEvent in JSON.
//
// The JSON is sdk-go's (its attribute order, extensions sorted by name),
// compacted and HTML-escaped as encoding/json leaves it. An event whose
// attributes are plain (printable ASCII without spaces), whose extensions
// are strings and whose data is JSON is written directly, to the same
// bytes; any other goes through sdk-go's marshaller.
func Encode(ev Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("events: encoding %s event %q: %w", ev.Type(), ev.ID(), err)
	}
	if b, ok := appendEvent(nil, ev); ok {
		return b, nil
	}
	return encodeSDK(ev)
}

// encodeSDK encodes a valid event through sdk-go's marshaller.
func encodeSDK(ev Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("events: encoding %s event %q: %w", ev.Type(), ev.ID(), err)
	}
	return b, nil
}

// appendEvent appends a valid event as encodeSDK encodes it, and reports
// false, leaving dst as it was, when the event is not one it writes.
func appendEvent(dst []byte, ev Event) ([]byte, bool) {
	ec, ok := ev.Context.(*event.EventContextV1)
	if !ok || ec.DataSchema != nil || ev.DataBase64 {
		return dst, false
	}
	source := ec.Source.String()
	if !plain(ec.ID) || !plain(source) || !plain(ec.Type) {
		return dst, false
	}
	if ec.Subject != nil && !plain(*ec.Subject) || ec.DataContentType != nil && !plain(*ec.DataContentType) {
		return dst, false
	}
	// sdk-go writes JSON data as it is, and anything else as a string;
	// only JSON is written here.
	if ev.DataEncoded != nil && (ec.DataContentType == nil || *ec.DataContentType != JSON) {
		return dst, false
	}
	names := make([]string, 0, len(ec.Extensions))
	for name, v := range ec.Extensions {
		s, ok := v.(string)
		if !ok || !extensionName(name) || s != "" && !plain(s) {
			return dst, false
		}
		names = append(names, name)
	}
	slices.Sort(names)
	start := len(dst)
	dst = appendAttr(dst, `{"specversion":`, event.CloudEventsVersionV1)
	dst = appendAttr(dst, `,"id":`, ec.ID)
	dst = appendAttr(dst, `,"source":`, source)
	dst = appendAttr(dst, `,"type":`, ec.Type)
	if ec.Subject != nil {
		dst = appendAttr(dst, `,"subject":`, *ec.Subject)
	}
	if ec.DataContentType != nil {
		dst = appendAttr(dst, `,"datacontenttype":`, *ec.DataContentType)
	}
	if ec.Time != nil {
		dst = appendTime(dst, ec.Time.Time)
	}
	if ev.DataEncoded != nil {
		dst = append(dst, `,"data":`...)
		var ok bool
		if dst, ok = appendCompactJSON(dst, ev.DataEncoded); !ok {
			return dst[:start], false
		}
	}
	for _, name := range names {
		dst = appendAttr(dst, `,"`+name+`":`, ec.Extensions[name].(string))
	}
	return append(dst, '}'), true
}

// AppendOutbound appends to dst the event that Outbound(id, source, typ,
// flow, run, traceparent, at, data) returns, with cause, when set, as its
// causation extension ([protocol.ExtCausation]), encoded as Encode encodes
// it, byte for byte, without building it. See [Encoder] for a source
// checked once.
func AppendOutbound(dst []byte, id, source, typ, flow, run, traceparent, cause string, at time.Time, data any) ([]byte, error) {
	return NewEncoder(source).AppendOutbound(dst, id, typ, flow, run, traceparent, cause, at, data)
}

// Encoder encodes the events one source publishes, as Encode(Outbound(...))
// does, byte for byte, writing the JSON directly rather than building an
// sdk-go event. It is safe for concurrent use.
type Encoder struct {
	source string
	// direct is set when the source is written as it is given: sdk-go
	// parses a source as a URI reference and writes it back, which leaves
	// a plain one unchanged.
	direct bool
}

// NewEncoder returns an encoder of the events of source.
func NewEncoder(source string) *Encoder {
	ev := event.New(event.CloudEventsVersionV1)
	ev.SetSource(source)
	return &Encoder{source: source, direct: len(ev.FieldErrors) == 0 && ev.Source() == source && plain(source)}
}

// AppendOutbound appends to dst the event Outbound(id, source, typ, flow,
// run, traceparent, at, data) returns, with the encoder's source and cause,
// when set, as its causation extension ([protocol.ExtCausation]), encoded
// as Encode encodes it.
func (e *Encoder) AppendOutbound(dst []byte, id, typ, flow, run, traceparent, cause string, at time.Time, data any) ([]byte, error) {
	if b, ok := e.appendDirect(dst, id, typ, flow, run, traceparent, cause, at, data); ok {
		return b, nil
	}
	ev, err := Outbound(id, e.source, typ, flow, run, traceparent, at, data)
	if err != nil {
		return dst, err
	}
	if cause != "" {
		if err := ev.Context.SetExtension(protocol.ExtCausation, cause); err != nil {
			return dst, fmt.Errorf("events: causation of %s event %q: %w", typ, id, err)
		}
	}
	b, err := Encode(ev)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendDirect writes what AppendOutbound writes when every attribute is
// plain and data is a value encoding/json encodes (not bytes or raw JSON,
// which sdk-go treats apart), and reports false, leaving dst as it was,
// otherwise.
func (e *Encoder) appendDirect(dst []byte, id, typ, flow, run, traceparent, cause string, at time.Time, data any) ([]byte, bool) {
	switch data.(type) {
	case nil, []byte, json.RawMessage:
		return dst, false
	}
	if !e.direct || !plain(id) || !plain(typ) || run != "" && !plain(run) || flow != "" && !plain(flow) ||
		traceparent != "" && !plain(traceparent) || cause != "" && !plain(cause) || at.IsZero() {
		return dst, false
	}
	start := len(dst)
	dst = appendAttr(dst, `{"specversion":`, event.CloudEventsVersionV1)
	dst = appendAttr(dst, `,"id":`, id)
	dst = appendAttr(dst, `,"source":`, e.source)
	dst = appendAttr(dst, `,"type":`, typ)
	if run != "" {
		dst = appendAttr(dst, `,"subject":`, run)
	}
	dst = appendAttr(dst, `,"datacontenttype":`, JSON)
	dst = appendTime(dst, at)
	dst = append(dst, `,"data":`...)
	// What json.Marshal writes, which is already compact and HTML-escaped.
	if a, ok := data.(jsonAppender); ok {
		var err error
		if dst, err = a.AppendJSON(dst); err != nil {
			return dst[:start], false
		}
	} else {
		w := appendWriter{b: dst}
		if err := json.NewEncoder(&w).Encode(data); err != nil {
			return dst[:start], false
		}
		dst = w.b[:len(w.b)-1] // Encode ends the value with a newline
	}
	// Extensions in sdk-go's order, by name.
	if cause != "" {
		dst = appendAttr(dst, `,"`+protocol.ExtCausation+`":`, cause)
	}
	dst = appendAttr(dst, `,"`+protocol.ExtFlow+`":`, flow)
	if traceparent != "" {
		dst = appendAttr(dst, `,"`+protocol.ExtTraceparent+`":`, traceparent)
	}
	return append(dst, '}'), true
}

// jsonAppender is data that appends its own JSON, byte for byte what
// json.Marshal writes for it (the engine's common event data).
type jsonAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// plain reports whether s is non-empty printable ASCII without spaces:
// what sdk-go and encoding/json write alike, and sdk-go's setters do not
// trim.
func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// extensionName reports whether name is a CloudEvents extension name as
// sdk-go takes them: lowercase letters and digits.
func extensionName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// appendAttr appends key and the plain string s as a JSON string, escaped
// as encoding/json escapes it (", \ and the HTML characters < > &).
func appendAttr(dst []byte, key, s string) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	if !strings.ContainsAny(s, `"\<>&`) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '<', '>', '&':
			dst = append(dst, `\u00`...)
			dst = append(dst, hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// appendTime appends the time attribute as sdk-go writes it: RFC 3339
// with nanoseconds, in UTC.
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, `,"time":"`...)
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendCompactJSON appends data compacted and HTML-escaped, as
// encoding/json leaves a marshaller's output, and reports false when data
// is not valid JSON.
func appendCompactJSON(dst, data []byte) ([]byte, bool) {
	if !json.Valid(data) {
		return dst, false
	}
	clean := true
	for _, c := range data {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2: // 0xE2 begins U+2028 and U+2029
			clean = false
		}
	}
	if clean {
		return append(dst, data...), true
	}
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return dst, false
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(dst, escaped.Bytes()...), true
}
