package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"reflect"
	"testing"
)

// legacyDecodeStructured is decodeStructured as it was, before its one-pass
// check: the tests hold decodeStructured to what it returned.
func legacyDecodeStructured(header map[string][]string, body []byte) (Event, error) {
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
	var probe struct {
		SpecVersion *string `json:"specversion"`
	}
	if err := json.Unmarshal(trimmed, &probe); err != nil {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: "body is not valid JSON: " + err.Error()}
	}
	if probe.SpecVersion == nil {
		return Event{}, &Error{Reason: ReasonUnparseable, Msg: "body has no \"specversion\": it is plain JSON, not a CloudEvent; wrap it as {\"specversion\":\"1.0\",\"id\":...,\"source\":...,\"type\":...,\"data\":{...}}"}
	}
	if err := walkDuplicateKeys(trimmed); err != nil {
		return Event{}, invalid("event", "%v", err)
	}
	var ev Event
	if err := json.Unmarshal(trimmed, &ev); err != nil {
		return Event{}, &Error{Reason: ReasonInvalidPayload, Msg: "structured CloudEvent does not decode: " + err.Error()}
	}
	if ev.DataBase64 {
		return Event{}, invalid("data_base64", "binary data is not accepted; put JSON in \"data\"")
	}
	return ev, nil
}

func TestDecodeStructuredAsBefore(t *testing.T) {
	for _, body := range []string{
		`{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a":1}}`,
		`{"SpecVersion":"1.0","id":"e-1","source":"/s","type":"t"}`,
		`{"specversion":"1.0","ſpecversion":"1.0","id":"e-1","source":"/s","type":"t"}`,
		`{"specversion":1,"id":"e-1","source":"/s","type":"t"}`,
		`{"specversion":null,"id":"e-1","source":"/s","type":"t"}`,
		`{"specversion":"1.0","id":"e-1","id":"e-2","source":"/s","type":"t"}`,
		`{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data":{"a":1,"a":2}}`,
		`{"specversion":"1.0","id":"e-1","source":"/s","type":"t","data_base64":"e30="}`,
		`{"specversion":"1.0","id":5,"source":"/s","type":"t"}`,
		`{"specversion":"1.0","id":"e-1","source":"/s","type":"t"`,
		`{"specversion":"0.3","id":"e-1","source":"/s","type":"t"}`,
		`{"id":"e-1"}`,
	} {
		sameDecode(t, []byte(body))
	}
}

func sameDecode(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := decodeStructured(nil, body)
	want, wantErr := legacyDecodeStructured(nil, body)
	if !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("%s: error %v, before %v", body, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded %v, before %v", body, got, want)
	}
}

// FuzzDecodeStructuredAsBefore holds decodeStructured to what it returned
// before its one-pass check, errors included.
func FuzzDecodeStructuredAsBefore(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"e-1","source":"/agents/support-bot","type":"io.interlock.run.resume","subject":"r-42","flow":"booking","data":{"resumeToken":"tok","selected":["a"]}}`))
	f.Add([]byte(`{"specversion":"1.0","id":"e-3","source":"/t","type":"t","data_base64":"e30="}`))
	f.Add([]byte(`{"SPECVERSION":"1.0","specversion":"1.0"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sameDecode(t, body)
	})
}
