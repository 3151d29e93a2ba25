package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/.

// FuzzDecodeEvent decodes arbitrary bodies, in structured mode when ceName
// is empty (ceValue is then the Content-Type header, if any) and in binary
// mode otherwise (header ce-<ceName> set to ceValue over a valid set of ce-
// headers).
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"e-1","source":"/agents/support-bot","type":"io.interlock.run.resume","subject":"r-42","flow":"booking","data":{"resumeToken":"tok","selected":["a"]}}`), "", events.Structured)
	f.Add([]byte(`{"specversion":"1.0","id":"e-2","source":"/t","type":"io.interlock.run.start"}`), "", "")
	f.Add([]byte(`{"decision":"approve"}`), "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add([]byte(`{}`), "time", "2026-11-21T10:30:00Z")
	f.Add([]byte(`{"specversion":"1.0","id":"e-3","source":"/t","type":"t","data_base64":"e30="}`), "", "")
	f.Add([]byte("\x00\xff{"), "", "text/plain")

	f.Fuzz(func(t *testing.T, body []byte, ceName, ceValue string) {
		var header map[string][]string
		switch {
		case ceName != "":
			header = binary(map[string][]string{"ce-" + ceName: {ceValue}})
		case ceValue != "":
			header = map[string][]string{"Content-Type": {ceValue}}
		}
		ev, err := events.Decode(header, body)
		if err != nil {
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, not an *events.Error", err, err)
			}
			if e.Reason != events.ReasonUnparseable && e.Reason != events.ReasonInvalidPayload {
				t.Fatalf("error %v has reason %q", err, e.Reason)
			}
			return
		}
		if ev.SpecVersion() != "1.0" {
			t.Fatalf("decoded an event of specversion %q", ev.SpecVersion())
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v", err)
		}
		if d := ev.Data(); len(d) > 0 && !json.Valid(d) {
			t.Fatalf("decoded data that is not JSON: %q", d)
		}

		enc, err := events.Encode(ev)
		if err != nil {
			t.Fatalf("a decoded event does not encode: %v", err)
		}
		if sdk, err := events.EncodeSDK(ev); err != nil || !bytes.Equal(enc, sdk) {
			t.Fatalf("Encode wrote %s, sdk-go's marshaller %s (%v)", enc, sdk, err)
		}
		again, err := events.Decode(structured, enc)
		if err != nil {
			t.Fatalf("the encoding %s of a decoded event does not decode: %v", enc, err)
		}
		attrs := []struct{ name, first, again string }{
			{"id", ev.ID(), again.ID()},
			{"type", ev.Type(), again.Type()},
			{"source", ev.Source(), again.Source()},
			{"subject", ev.Subject(), again.Subject()},
			{"datacontenttype", ev.DataContentType(), again.DataContentType()},
		}
		for _, a := range attrs {
			if a.first != a.again {
				t.Fatalf("%s changed from %q to %q through %s", a.name, a.first, a.again, enc)
			}
		}
		if !ev.Time().Equal(again.Time()) {
			t.Fatalf("time changed from %v to %v through %s", ev.Time(), again.Time(), enc)
		}
		if k1, k2 := slices.Sorted(maps.Keys(ev.Extensions())), slices.Sorted(maps.Keys(again.Extensions())); !slices.Equal(k1, k2) {
			t.Fatalf("extensions changed from %v to %v through %s", k1, k2, enc)
		}
		if !sameJSON(ev.Data(), again.Data()) {
			t.Fatalf("data changed from %q to %q through %s", ev.Data(), again.Data(), enc)
		}
		if enc2, err := events.Encode(again); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %s then %s (%v)", enc, enc2, err)
		}
	})
}

// FuzzEncodeOutbound encodes outbound events with arbitrary attributes and
// data and checks that AppendOutbound writes what sdk-go's marshaller
// writes for the same event, or fails as it does.
func FuzzEncodeOutbound(f *testing.F) {
	f.Add("abc-7", "interlock/host-1", protocol.TypeInterrupted, "booking", "r-42", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", int64(1795255200000000000), []byte(`{"flow":"booking","origin":{"a":"<b>&"}}`))
	f.Add("abc-8", "interlock/host-1", protocol.TypeCompleted, "booking", "r-42", "", "9f86d081884c7d65", int64(1795255200000000000), []byte(`{"flow":"booking"}`))
	f.Add("a b", "/x y", "t", "", "", "", "c <d>", int64(1), []byte(`"\u2028 <"`))
	f.Add("id", "http://h/p?q=1#f", "t\"", "f\u00e9", "r", "tp", "", int64(0), []byte(`[1, 2.50, null]`))
	f.Add("id", ":bad", "t", "f", " r ", "tp", "c", int64(-1), []byte(`{}`))

	f.Fuzz(func(t *testing.T, id, source, typ, flow, run, traceparent, cause string, nanos int64, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			v = map[string]string{"raw": string(data)}
		}
		at := time.Unix(0, nanos)
		for _, d := range []any{v, struct {
			V    any             `json:"v"`
			Raw  json.RawMessage `json:"raw,omitempty"`
			Text string          `json:"text"`
		}{V: v, Text: string(data)}} {
			got, gotErr := events.AppendOutbound([]byte("prefix"), id, source, typ, flow, run, traceparent, cause, at, d)
			var want []byte
			ev, wantErr := events.Outbound(id, source, typ, flow, run, traceparent, at, d)
			if wantErr == nil && cause != "" {
				wantErr = ev.Context.SetExtension(protocol.ExtCausation, cause)
			}
			if wantErr == nil {
				if wantErr = ev.Validate(); wantErr == nil {
					want, wantErr = events.EncodeSDK(ev)
				}
			}
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("AppendOutbound: %v; sdk-go: %v", gotErr, wantErr)
			}
			if gotErr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("AppendOutbound wrote\n%s\nsdk-go\n%s", got, want)
			}
		}
	})
}

// FuzzParseResume parses arbitrary resume data.
func FuzzParseResume(f *testing.F) {
	f.Add([]byte(`{"resumeToken":"tok","requestId":"rq","answers":{"email":"ann@example.com"},"expectedCheckpoint":7,"idempotencyKey":"k"}`))
	f.Add([]byte(`{"selected":"a"}`))
	f.Add([]byte(`{"selected":{"choices":[{"id":"a"},{"id":"b"}]}}`))
	f.Add([]byte(`{"decision":"edit","edits":{"amount":400},"approver":"ann","reason":"ok"}`))
	f.Add([]byte(`{"expectedCheckpoint":-1}`))
	f.Add([]byte(`{"answers":5}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := events.ParseResume(data)
		if err != nil {
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, not an *events.Error", err, err)
			}
			if e.Reason != events.ReasonInvalidPayload {
				t.Fatalf("error %v has reason %q", err, e.Reason)
			}
			if !strings.HasPrefix(e.Field, "data") {
				t.Fatalf("error %v names field %q, not one of data", err, e.Field)
			}
			if strings.Contains(e.Field, "Resume") {
				t.Fatalf("error %v names the Go struct, not the JSON field", err)
			}
			return
		}
		for i, id := range r.Selected {
			if strings.TrimSpace(id) == "" {
				t.Fatalf("selected[%d] is an empty id in %q", i, r.Selected)
			}
		}
		switch r.Decision {
		case "", "approve", "edit", "reject", "respond":
		default:
			t.Fatalf("accepted decision %q", r.Decision)
		}
		if _, ok := r.Answers[""]; ok {
			t.Fatal("accepted an answer with an empty field name")
		}

		// What ParseResume returns, encoded, parses back to the same.
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a parsed resume does not encode: %v", err)
		}
		again, err := events.ParseResume(enc)
		if err != nil {
			t.Fatalf("the encoding %s of a parsed resume does not parse: %v", enc, err)
		}
		enc2, err := json.Marshal(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("resume changed through encoding: %s then %s (%v)", enc, enc2, err)
		}
	})
}

// FuzzParseSelected parses arbitrary choice answers.
func FuzzParseSelected(f *testing.F) {
	f.Add([]byte(`"a"`))
	f.Add([]byte(`["a","b"]`))
	f.Add([]byte(`{"choice":{"id":"a"}}`))
	f.Add([]byte(`{"choices":[{"id":"a"}]}`))
	f.Add([]byte(`{"choice":{"id":"a"},"choices":[]}`))
	f.Add([]byte(`[""]`))

	f.Fuzz(func(t *testing.T, raw []byte) {
		ids, err := events.ParseSelected(raw)
		if err != nil {
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, not an *events.Error", err, err)
			}
			if e.Reason != events.ReasonInvalidPayload || !strings.HasPrefix(e.Field, "data.selected") {
				t.Fatalf("error %v has reason %q and field %q", err, e.Reason, e.Field)
			}
			return
		}
		for i, id := range ids {
			if strings.TrimSpace(id) == "" {
				t.Fatalf("ParseSelected(%q) returned an empty id at %d: %q", raw, i, ids)
			}
		}
		// ParseSelected trims any Unicode white space (bytes.TrimSpace), so
		// it accepts "\v\"a\"", which is not JSON; it accepts nothing else.
		if !json.Valid(bytes.TrimSpace(raw)) {
			t.Fatalf("ParseSelected accepted %q, which is not JSON", raw)
		}
		if !json.Valid(raw) {
			return
		}
		// The same answer inside resume data gives the same ids.
		data := append(append([]byte(`{"selected":`), raw...), '}')
		r, err := events.ParseResume(data)
		if err != nil {
			t.Fatalf("ParseSelected accepted %q but ParseResume refused %s: %v", raw, data, err)
		}
		if !reflect.DeepEqual(r.Selected, ids) {
			t.Fatalf("ParseResume(%s).Selected = %q, ParseSelected gave %q", data, r.Selected, ids)
		}
	})
}

// sameJSON reports whether a and b are both empty or hold the same JSON
// text apart from insignificant white space.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	// Encoding escapes <, > and & (as encoding/json does): "&" and
	// "\u0026" are the same JSON.
	var ca, cb, ea, eb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	json.HTMLEscape(&ea, ca.Bytes())
	json.HTMLEscape(&eb, cb.Bytes())
	return bytes.Equal(ea.Bytes(), eb.Bytes())
}

// FuzzParseToolRequest parses arbitrary tool request data: it never
// panics, and what it accepts names a call and a tool and encodes back to
// data it accepts again.
func FuzzParseToolRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := events.ParseToolRequest(data)
		if err != nil {
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseToolRequest(%q) error %v is not an *events.Error", data, err)
			}
			return
		}
		if r.CallID == "" || r.Tool == "" {
			t.Fatalf("ParseToolRequest(%q) accepted a request without callId or tool: %+v", data, r)
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := events.ParseToolRequest(enc); err != nil {
			t.Fatalf("ParseToolRequest accepted %q but not its encoding %s: %v", data, enc, err)
		}
	})
}

// FuzzParseExpire parses arbitrary expire data without panicking.
func FuzzParseExpire(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := events.ParseExpire(data)
		if err == nil && e.RequestID == "" {
			t.Fatalf("ParseExpire(%q) accepted data without requestId", data)
		}
	})
}

func FuzzParseRemind(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := events.ParseRemind(data)
		if err == nil && r.RequestID == "" {
			t.Fatalf("ParseRemind(%q) accepted data without requestId", data)
		}
	})
}

func FuzzParseAssign(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := events.ParseAssign(data)
		if err != nil {
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseAssign(%q) = %T %v, want an *events.Error", data, err, err)
			}
			return
		}
		switch {
		case a.RequestID == "":
			t.Fatalf("ParseAssign(%q) accepted data without requestId", data)
		case a.Op != protocol.AssignClaim && a.Op != protocol.AssignRelease && a.Op != protocol.AssignDelegate:
			t.Fatalf("ParseAssign(%q) accepted op %q", data, a.Op)
		case (a.Op == protocol.AssignDelegate) != (a.To != ""):
			t.Fatalf("ParseAssign(%q) accepted op %q with to %q", data, a.Op, a.To)
		}
	})
}
