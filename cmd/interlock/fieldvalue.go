package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// assignment is a field=value or a field:=JSON argument.
type assignment struct {
	field, text string
	// json is set for field:=JSON: text is sent as is.
	json bool
}

// valueRule is the one rule for field=value, said where a value was read
// otherwise than meant.
const valueRule = "field=value sends a value typed as the field's type when Interlock knows it, else a value that is JSON (900, true, null) as that JSON and anything else as a string; field:=JSON says the type outright: amount:=900 is a number, zip:='\"01234\"' a string"

// parseAssignments splits field=value and field:=JSON arguments; what
// names them in errors ("argument", "--edit").
func parseAssignments(what string, args []string) ([]assignment, error) {
	var out []assignment
	for _, a := range args {
		if k, v, ok := strings.Cut(a, ":="); ok && k != "" && !strings.Contains(k, "=") {
			if !json.Valid([]byte(v)) {
				return nil, usagef("%s %s: the value after := must be JSON, such as %s:=900 or %s:='\"text\"' (use %s=value to let the field's type decide)", what, a, k, k, k)
			}
			out = append(out, assignment{field: k, text: v, json: true})
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q is not field=value or field:=JSON", what, a)
		}
		out = append(out, assignment{field: k, text: v})
	}
	return out, nil
}

// values reads assignments by the one rule of [protocol.Value], the type
// of each field given by typeOf ("" when unknown).
func values(what string, as []assignment, typeOf func(field string) string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, a := range as {
		if a.json {
			out[a.field] = json.RawMessage(a.text)
			continue
		}
		v, err := protocol.Value(a.text, typeOf(a.field))
		if err != nil {
			return nil, usagef("%s %s=%s: %s is a %s: %v", what, a.field, a.text, a.field, typeOf(a.field), err)
		}
		out[a.field] = v
	}
	return out, nil
}

// unknownTypes is the typeOf of fields whose types are not known.
func unknownTypes(string) string { return "" }

// hintValueRule says the rule of field=value after a refusal that says a
// value does not fit the state: a value was read as other than meant.
func hintValueRule(w io.Writer, ev client.Event) {
	if ev.Kind != protocol.EventRefused {
		return
	}
	var ref protocol.Refused
	if ev.Decode(&ref) != nil || !strings.Contains(ref.Message, "does not fit") {
		return
	}
	fmt.Fprintf(w, "hint: %s\n", valueRule)
}
