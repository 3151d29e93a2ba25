package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// fieldType returns the JSON type of the state field at path (field, or
// parent.child) in a state of Go type t, as encoding/json would encode
// it, or "" when the type does not tell (an interface, a type with its
// own JSON encoding, a field t does not have).
func fieldType(t reflect.Type, path string) string {
	for part := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := jsonField(t, part)
			if !ok {
				return ""
			}
			t = f.Type
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				return ""
			}
			t = t.Elem()
		default:
			return ""
		}
	}
	return jsonType(t)
}

var (
	jsonRaw    = reflect.TypeFor[json.RawMessage]()
	goTimeType = reflect.TypeFor[time.Time]()
)

// jsonType returns the JSON type encoding/json gives a value of Go type
// t, or "" when it may give any.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == goTimeType:
		return protocol.JSONString
	case t == jsonRaw, t.Implements(jsonMarshaler), reflect.PointerTo(t).Implements(jsonMarshaler):
		return ""
	case t.Implements(textMarshaler), reflect.PointerTo(t).Implements(textMarshaler):
		return protocol.JSONString
	}
	switch t.Kind() {
	case reflect.String:
		return protocol.JSONString
	case reflect.Bool:
		return protocol.JSONBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return protocol.JSONInteger
	case reflect.Float32, reflect.Float64:
		return protocol.JSONNumber
	case reflect.Struct, reflect.Map:
		return protocol.JSONObject
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return protocol.JSONString // base64
		}
		return protocol.JSONArray
	case reflect.Array:
		return protocol.JSONArray
	}
	return ""
}

// jsonField finds the field of struct type t that encoding/json names
// name: by its JSON name, else, as encoding/json does last, by a name
// equal but for case.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	fs := jsonFields(t)
	if f, ok := fs[name]; ok {
		return f, true
	}
	for n, f := range fs {
		if strings.EqualFold(n, name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// stateTypes returns the JSON types of the fields of a state of Go type t
// that a path may name: field, and parent.child one level down.
func stateTypes(t reflect.Type) map[string]string {
	out := map[string]string{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for name, f := range jsonFields(t) {
		typ := jsonType(f.Type)
		if typ == "" {
			continue
		}
		out[name] = typ
		inner := f.Type
		for inner.Kind() == reflect.Pointer {
			inner = inner.Elem()
		}
		if typ != protocol.JSONObject || inner.Kind() != reflect.Struct {
			continue
		}
		for child, cf := range jsonFields(inner) {
			if ct := jsonType(cf.Type); ct != "" {
				out[name+"."+child] = ct
			}
		}
	}
	return out
}

// jsonFields returns the fields of struct type t by the names
// encoding/json gives them.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		n, _, _ := strings.Cut(tag, ",")
		if n == "" {
			n = f.Name
		}
		out[n] = f
	}
	return out
}
