package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// structured is the header of a structured-mode CloudEvent.
var structured = map[string][]string{"Content-Type": {events.Structured}}

// binary returns the ce- headers of a binary-mode resume event, with extra
// headers added or replaced.
func binary(extra map[string][]string) map[string][]string {
	h := map[string][]string{
		"ce-specversion": {"1.0"},
		"ce-id":          {"b-1"},
		"ce-source":      {"/slack/approvals"},
		"ce-type":        {protocol.TypeResume},
		"ce-subject":     {"r-42"},
	}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// wantEventError checks that err is an *events.Error with the reason and,
// when field is not empty, the field.
func wantEventError(t *testing.T, err error, reason, field string) {
	t.Helper()
	var e *events.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *events.Error", err, err)
	}
	if e.Reason != reason {
		t.Errorf("Reason = %q, want %q (error: %v)", e.Reason, reason, err)
	}
	if field != "" && e.Field != field {
		t.Errorf("Field = %q, want %q (error: %v)", e.Field, field, err)
	}
	if !strings.HasPrefix(err.Error(), "events: ") {
		t.Errorf("error %q does not start with the package prefix", err)
	}
	if field != "" && !strings.Contains(err.Error(), field) {
		t.Errorf("error %q does not name the field %q", err, field)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	const valid = `{"specversion":"1.0","id":"e-1","source":"/agents/support-bot","type":"io.interlock.run.resume","subject":"r-42","datacontenttype":"application/json","flow":"booking","data":{"resumeToken":"tok"}}`
	// A valid event padded with spaces to exactly MaxSize bytes.
	atLimit := valid + strings.Repeat(" ", events.MaxSize-len(valid))

	cases := []struct {
		name       string
		header     map[string][]string
		body       string
		wantErr    bool
		wantReason string
		wantField  string
		wantID     string
		wantData   string
	}{
		{name: "structured with its content type", header: structured, body: valid,
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured with content type parameters", header: map[string][]string{"Content-Type": {events.Structured + "; charset=utf-8"}}, body: valid,
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured sent as application/json", header: map[string][]string{"Content-Type": {events.JSON}}, body: valid,
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured without a content type header", header: nil, body: valid,
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured with a lower-case header name", header: map[string][]string{"content-type": {events.Structured}}, body: valid,
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured with surrounding white space", header: nil, body: "\n\t " + valid + "\r\n",
			wantID: "e-1", wantData: `{"resumeToken":"tok"}`},
		{name: "structured without data", header: structured,
			body:   `{"specversion":"1.0","id":"e-2","source":"/t","type":"io.interlock.run.cancel"}`,
			wantID: "e-2"},
		{name: "structured with a JSON string as data", header: structured,
			body:   `{"specversion":"1.0","id":"e-3","source":"/t","type":"io.interlock.run.cancel","data":"now"}`,
			wantID: "e-3", wantData: `"now"`},
		{name: "body of exactly MaxSize bytes", header: nil, body: atLimit, wantID: "e-1", wantData: `{"resumeToken":"tok"}`},

		{name: "binary mode with ce- headers", header: binary(map[string][]string{"ce-flow": {"booking"}}), body: `{"decision":"approve"}`,
			wantID: "b-1", wantData: `{"decision":"approve"}`},
		{name: "binary mode header names in any case", header: map[string][]string{
			"Ce-Specversion": {"1.0"}, "CE-ID": {"b-2"}, "Ce-Source": {"/t"}, "Ce-Type": {protocol.TypeStart},
		}, body: `{}`, wantID: "b-2", wantData: `{}`},
		{name: "binary mode without a body", header: binary(nil), body: "", wantID: "b-1"},
		{name: "binary mode with a JSON content type header", header: binary(map[string][]string{"Content-Type": {events.JSON}}), body: `[1]`,
			wantID: "b-1", wantData: `[1]`},
		{name: "binary mode with a +json data content type", header: binary(map[string][]string{"ce-datacontenttype": {"application/vnd.acme+json"}}), body: `{"a":1}`,
			wantID: "b-1", wantData: `{"a":1}`},
		{name: "binary mode with an RFC 3339 time", header: binary(map[string][]string{"ce-time": {"2026-11-21T10:30:00.5Z"}}), body: `{}`,
			wantID: "b-1", wantData: `{}`},
		{name: "binary mode with a body that is not JSON", header: binary(nil), body: "approve",
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "data"},
		{name: "binary mode with a text data content type", header: binary(map[string][]string{"ce-datacontenttype": {"text/plain"}}), body: `"hi"`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "datacontenttype"},
		{name: "binary mode with a text content type header", header: binary(map[string][]string{"Content-Type": {"text/plain"}}), body: `"hi"`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "datacontenttype"},
		{name: "binary mode with a bad time", header: binary(map[string][]string{"ce-time": {"yesterday"}}), body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "ce-time"},
		{name: "binary mode with a bad extension name", header: binary(map[string][]string{"ce-my_ext": {"x"}}), body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "ce-my_ext"},
		{name: "binary mode with specversion 0.3", header: binary(map[string][]string{"ce-specversion": {"0.3"}}), body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "specversion"},
		{name: "binary mode with an unknown specversion", header: binary(map[string][]string{"ce-specversion": {"2.0"}}), body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "ce-specversion"},
		{name: "binary mode without ce-id", header: map[string][]string{"ce-specversion": {"1.0"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeStart}}, body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "binary mode without ce-source", header: map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-type": {protocol.TypeStart}}, body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "binary mode without ce-type", header: map[string][]string{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"/t"}}, body: `{}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},

		{name: "body over MaxSize", header: structured, body: atLimit + " ",
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "empty body without headers", header: nil, body: "",
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "plain text", header: nil, body: "hello",
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "binary garbage", header: nil, body: "\x00\xff\xfe",
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "JSON list", header: structured, body: `[1,2]`,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "truncated JSON object", header: structured, body: `{"specversion":"1.0",`,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "JSON object followed by more", header: nil, body: valid + ` {}`,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "plain JSON, not a CloudEvent", header: nil, body: `{"resumeToken":"x"}`,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "structured body with a foreign content type", header: map[string][]string{"Content-Type": {"text/plain"}}, body: valid,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "data_base64 refused", header: structured,
			body:    `{"specversion":"1.0","id":"e-4","source":"/t","type":"io.interlock.run.start","data_base64":"e30="}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "data_base64"},
		{name: "specversion 0.3", header: structured,
			body:    `{"specversion":"0.3","id":"e-5","source":"/t","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "specversion"},
		{name: "unknown specversion", header: structured,
			body:    `{"specversion":"2.0","id":"e-6","source":"/t","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "specversion not a string", header: structured,
			body:    `{"specversion":1,"id":"e-7","source":"/t","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonUnparseable},
		{name: "missing id", header: structured,
			body:    `{"specversion":"1.0","source":"/t","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "blank id", header: structured,
			body:    `{"specversion":"1.0","id":"  ","source":"/t","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "missing source", header: structured,
			body:    `{"specversion":"1.0","id":"e-8","type":"io.interlock.run.start"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "missing type", header: structured,
			body:    `{"specversion":"1.0","id":"e-9","source":"/t"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload},
		{name: "data that is not JSON", header: structured,
			body:    `{"specversion":"1.0","id":"e-10","source":"/t","type":"io.interlock.run.start","datacontenttype":"text/plain","data":"hello"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "datacontenttype"},
		{name: "JSON data content type with string data that is not JSON", header: structured,
			body:    `{"specversion":"1.0","id":"e-11","source":"/t","type":"io.interlock.run.start","datacontenttype":"application/xml","data":"<a/>"}`,
			wantErr: true, wantReason: events.ReasonInvalidPayload, wantField: "datacontenttype"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := events.Decode(tc.header, []byte(tc.body))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Decode accepted %s", tc.body)
				}
				wantEventError(t, err, tc.wantReason, tc.wantField)
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if ev.ID() != tc.wantID {
				t.Errorf("ID = %q, want %q", ev.ID(), tc.wantID)
			}
			if ev.SpecVersion() != "1.0" {
				t.Errorf("SpecVersion = %q, want 1.0", ev.SpecVersion())
			}
			if got := string(ev.Data()); got != tc.wantData {
				t.Errorf("Data = %q, want %q", got, tc.wantData)
			}
		})
	}
}

func TestDecodeBinaryModeReadsEveryAttribute(t *testing.T) {
	t.Parallel()
	h := binary(map[string][]string{
		"ce-time":         {"2026-11-21T10:30:00Z"},
		"ce-dataschema":   {"https://interlock.example/schemas/resume.json"},
		"ce-flow":         {"booking"},
		"ce-traceparent":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Nats-Msg-Id":     {"b-1"},
		"X-Not-An-Attrib": {"ignored"},
	})
	ev, err := events.Decode(h, []byte(`{"decision":"approve"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	checks := []struct{ name, got, want string }{
		{"id", ev.ID(), "b-1"},
		{"source", ev.Source(), "/slack/approvals"},
		{"type", ev.Type(), protocol.TypeResume},
		{"subject", ev.Subject(), "r-42"},
		{"dataschema", ev.DataSchema(), "https://interlock.example/schemas/resume.json"},
		{"datacontenttype", ev.DataContentType(), events.JSON},
		{"flow", events.StringExtension(ev, protocol.ExtFlow), "booking"},
		{"traceparent", events.StringExtension(ev, protocol.ExtTraceparent), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if want := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC); !ev.Time().Equal(want) {
		t.Errorf("time = %v, want %v", ev.Time(), want)
	}
	if exts := ev.Extensions(); len(exts) != 2 {
		t.Errorf("extensions = %v, want only flow and traceparent", exts)
	}
}

func TestDecodeBinaryModeCopiesTheBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"decision":"approve"}`)
	ev, err := events.Decode(binary(nil), body)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	copy(body, `{"decision":"reject!"}`)
	if got := string(ev.Data()); got != `{"decision":"approve"}` {
		t.Errorf("data changed with the caller's buffer: %s", got)
	}
}

func TestEncodeThenDecodeKeepsTheEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 30, 0, 123456789, time.UTC)
	cases := []struct {
		name     string
		subject  string
		data     any
		wantData string
	}{
		{"struct data", "r-42", protocol.Refused{Flow: "booking", Run: "r-42", Code: "token_mismatch", Message: "no"},
			`{"flow":"booking","run":"r-42","code":"token_mismatch","message":"no"}`},
		{"raw JSON data", "r-43", json.RawMessage(`{"state":{"name":"Ann"}}`), `{"state":{"name":"Ann"}}`},
		{"no subject", "", map[string]int{"n": 1}, `{"n":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := events.New("ev-1", "interlock/test", protocol.TypeRefused, tc.subject, at, tc.data)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ev.SetExtension(protocol.ExtFlow, "booking")
			ev.SetExtension(protocol.ExtTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			body, err := events.Encode(ev)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := events.Decode(structured, body)
			if err != nil {
				t.Fatalf("Decode of %s: %v", body, err)
			}
			checks := []struct{ name, got, want string }{
				{"id", got.ID(), "ev-1"},
				{"source", got.Source(), "interlock/test"},
				{"type", got.Type(), protocol.TypeRefused},
				{"subject", got.Subject(), tc.subject},
				{"datacontenttype", got.DataContentType(), events.JSON},
				{"flow", events.StringExtension(got, protocol.ExtFlow), "booking"},
				{"traceparent", events.StringExtension(got, protocol.ExtTraceparent), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
				}
			}
			if !got.Time().Equal(at) {
				t.Errorf("time = %v, want %v", got.Time(), at)
			}
			if len(got.Extensions()) != 2 {
				t.Errorf("extensions = %v, want flow and traceparent", got.Extensions())
			}
			if !jsonEqual(t, got.Data(), []byte(tc.wantData)) {
				t.Errorf("data = %s, want %s", got.Data(), tc.wantData)
			}
		})
	}
}

func TestEncodeWritesStructuredJSON(t *testing.T) {
	t.Parallel()
	ev, err := events.New("ev-2", "interlock/test", protocol.TypeCompleted, "r-1", time.Unix(0, 0).UTC(), map[string]string{"a": "b"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("Encode wrote %s, not a JSON object: %v", body, err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("encoded event %s has no %q", body, k)
		}
	}
	if !bytes.Equal(doc["data"], []byte(`{"a":"b"}`)) {
		t.Errorf("data is %s, want it inline as JSON", doc["data"])
	}
}

func TestEncodeRefusesAnInvalidEvent(t *testing.T) {
	t.Parallel()
	ev, err := events.New("", "interlock/test", protocol.TypeStarted, "r-1", time.Now(), nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := events.Encode(ev); err == nil {
		t.Fatal("Encode accepted an event without an id")
	}
}

func TestNewRefusesDataThatIsNotJSON(t *testing.T) {
	t.Parallel()
	if _, err := events.New("ev-3", "interlock/test", protocol.TypeStarted, "r-1", time.Now(), make(chan int)); err == nil {
		t.Fatal("New accepted a channel as data")
	}
}

func TestStringExtension(t *testing.T) {
	t.Parallel()
	ev, err := events.Decode(nil, []byte(`{"specversion":"1.0","id":"e","source":"/t","type":"t","flow":"booking","count":5}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	cases := []struct{ name, want string }{
		{"flow", "booking"},
		{"count", ""}, // not a string
		{"missing", ""},
	}
	for _, tc := range cases {
		if got := events.StringExtension(ev, tc.name); got != tc.want {
			t.Errorf("StringExtension(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *events.Error
		want string
	}{
		{&events.Error{Reason: events.ReasonInvalidPayload, Field: "data.answers", Msg: "must be an object"}, "events: data.answers: must be an object"},
		{&events.Error{Reason: events.ReasonUnparseable, Msg: "not JSON"}, "events: not JSON"},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// An outbound event names the command that caused it in the causationid
// extension: written as sdk-go writes it, and read back by Decode.
func TestOutboundCausationIsAnExtensionSDKGoWritesAndReads(t *testing.T) {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	data := &protocol.Completed{Flow: "booking", Run: "r-42"}
	for _, tc := range []struct{ name, cause string }{
		{"plain", "9f86d081884c7d659a2feaa0c55ad015"},
		{"not plain", "ev 1 <&>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := events.AppendOutbound(nil, "abc-7", "interlock/host-1", protocol.TypeCompleted, "booking", "r-42", "", tc.cause, at, data)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := events.Outbound("abc-7", "interlock/host-1", protocol.TypeCompleted, "booking", "r-42", "", at, data)
			if err != nil {
				t.Fatal(err)
			}
			if err := ev.Context.SetExtension(protocol.ExtCausation, tc.cause); err != nil {
				t.Fatalf("sdk-go refuses the %s extension: %v", protocol.ExtCausation, err)
			}
			want, err := events.EncodeSDK(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendOutbound wrote\n%s\nsdk-go\n%s", got, want)
			}
			back, err := events.Decode(structured, got)
			if err != nil {
				t.Fatal(err)
			}
			if c := events.StringExtension(back, protocol.ExtCausation); c != tc.cause {
				t.Fatalf("decoded %s = %q, want %q", protocol.ExtCausation, c, tc.cause)
			}
		})
	}
}
