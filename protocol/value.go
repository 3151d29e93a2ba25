package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// JSON types of a field, as JSON Schema names them. A question carries
// the type of the field it fills ([Question.Type]) when Interlock knows
// it; an approval's args carry theirs in their values ([JSONTypeOf]).
const (
	JSONString  = "string"
	JSONNumber  = "number"
	JSONInteger = "integer"
	JSONBoolean = "boolean"
	JSONObject  = "object"
	JSONArray   = "array"
)

// JSONTypeOf returns the JSON type of a JSON value: string, number (never
// integer: 4800 may be the value of a field that takes 12.5), boolean,
// object, array, "null", or "" when raw is empty or not JSON.
func JSONTypeOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !json.Valid(raw) {
		return ""
	}
	switch raw[0] {
	case '"':
		return JSONString
	case '{':
		return JSONObject
	case '[':
		return JSONArray
	case 't', 'f':
		return JSONBoolean
	case 'n':
		return "null"
	}
	return JSONNumber
}

// Value reads text a person typed (the value of a field=value argument,
// a form's or a modal's field) as the JSON value of a field whose JSON
// type is typ, or "" when the type is not known. It is the one rule for
// typed text on every surface:
//
//   - a field of type string takes the text as a string, whatever it
//     spells;
//   - a field of type number, integer, boolean, object or array takes
//     text that is JSON of that type, and other text is an error that
//     says what to type;
//   - a field of unknown type takes text that is JSON (900, true, null,
//     {"a": 1}, ["a"], "quoted") as that JSON, and other text as a
//     string.
//
// A surface that takes field=value also takes field:=JSON, sent as is,
// to say the type outright: amount:=900 is a number, zip:='"01234"' a
// string.
func Value(text, typ string) (json.RawMessage, error) {
	asString := func() json.RawMessage { b, _ := json.Marshal(text); return b }
	t := strings.TrimSpace(text)
	got := JSONTypeOf(json.RawMessage(t))
	switch typ {
	case JSONString:
		return asString(), nil
	case "":
		if got == "" {
			return asString(), nil
		}
		return json.RawMessage(t), nil
	case JSONNumber:
		if got == JSONNumber {
			return json.RawMessage(t), nil
		}
		return nil, fmt.Errorf("%q is not a number: type digits, such as 900 or 12.5", Truncate(text, 64))
	case JSONInteger:
		if got == JSONNumber && !strings.ContainsAny(t, ".eE") {
			return json.RawMessage(t), nil
		}
		return nil, fmt.Errorf("%q is not a whole number: type digits, such as 900", Truncate(text, 64))
	case JSONBoolean:
		if got == JSONBoolean {
			return json.RawMessage(t), nil
		}
		return nil, fmt.Errorf("%q is not true or false", Truncate(text, 64))
	case JSONObject:
		if got == JSONObject {
			return json.RawMessage(t), nil
		}
		return nil, fmt.Errorf("%q is not a JSON object: type one such as {\"key\": \"value\"}", Truncate(text, 64))
	case JSONArray:
		if got == JSONArray {
			return json.RawMessage(t), nil
		}
		return nil, fmt.Errorf("%q is not a JSON array: type one such as [\"a\", \"b\"]", Truncate(text, 64))
	}
	// A type this version does not know: as if unknown.
	if got == "" {
		return asString(), nil
	}
	return json.RawMessage(t), nil
}
