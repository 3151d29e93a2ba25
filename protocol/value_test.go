package protocol_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestValueReadsTypedTextByOneRule(t *testing.T) {
	cases := []struct {
		text, typ, want, err string
	}{
		{"900", "", "900", ""},
		{"900", "string", `"900"`, ""},
		{"900", "number", "900", ""},
		{"12.5", "number", "12.5", ""},
		{"12.5", "integer", "", "not a whole number"},
		{"900", "integer", "900", ""},
		{"lots", "number", "", `"lots" is not a number`},
		{"true", "", "true", ""},
		{"yes", "boolean", "", "not true or false"},
		{"false", "boolean", "false", ""},
		{"01234", "", `"01234"`, ""},
		{"555-0100", "", `"555-0100"`, ""},
		{`"quoted"`, "", `"quoted"`, ""},
		{`{"a": 1}`, "", `{"a": 1}`, ""},
		{`{"a": 1}`, "object", `{"a": 1}`, ""},
		{"[1]", "object", "", "not a JSON object"},
		{`["a"]`, "array", `["a"]`, ""},
		{"a, b", "array", "", "not a JSON array"},
		{"null", "", "null", ""},
		{"anything at all", "string", `"anything at all"`, ""},
		{" 42 ", "", "42", ""},
		{"42", "a-type-of-tomorrow", "42", ""},
	}
	for _, c := range cases {
		got, err := protocol.Value(c.text, c.typ)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Value(%q, %q) = %s, %v; want an error saying %q", c.text, c.typ, got, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("Value(%q, %q) = %s, %v; want %s", c.text, c.typ, got, err, c.want)
		}
	}
}

func TestJSONTypeOfNamesEveryJSONValue(t *testing.T) {
	for raw, want := range map[string]string{
		`"a"`: "string", "4800": "number", "-1.5e3": "number", "true": "boolean", "false": "boolean",
		"null": "null", `{}`: "object", `[]`: "array", "": "", "nope": "",
	} {
		if got := protocol.JSONTypeOf([]byte(raw)); got != want {
			t.Errorf("JSONTypeOf(%s) = %q, want %q", raw, got, want)
		}
	}
}
