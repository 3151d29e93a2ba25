package engine

import (
	"github.com/interlockhq/interlock/internal/jsonw"

	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// Update is a set of changes to a run's state: field name (or parent.child
// for one level of nesting) to new value. Each top-level field goes through
// the reducer the flow declares for it; values must survive a JSON round trip.
type Update map[string]any

// Reducer says how an update to a state field combines with its value.
type Reducer int

const (
	// Replace sets the field to the new value. It is the default.
	Replace Reducer = iota
	// Append appends to a list field: a list value is concatenated, any other
	// value is added as one element. The list is never replaced.
	Append
	// Merge merges an object value into an object field, key by key (shallow).
	Merge
)

// String returns the reducer's name.
func (r Reducer) String() string {
	switch r {
	case Replace:
		return "replace"
	case Append:
		return "append"
	case Merge:
		return "merge"
	}
	return fmt.Sprintf("Reducer(%d)", int(r))
}

// Doc is a run's state as stored: top-level field name to JSON value.
type Doc map[string]json.RawMessage

// clone returns a shallow copy; values are immutable byte slices.
// raw returns the state as json.Marshal writes it (keys in order), for
// an event that carries it.
func (d Doc) raw() json.RawMessage {
	w := jsonw.Writer{}
	w.RawMap("", d, false)
	if w.Err != nil {
		// A state holds valid JSON values only: encoding/json says why not.
		b, _ := json.Marshal(d)
		return b
	}
	return w.B
}

func (d Doc) clone() Doc {
	c := make(Doc, len(d))
	for k, v := range d {
		c[k] = v
	}
	return c
}

// splitPath splits "a" or "a.b" and rejects deeper or empty paths.
func splitPath(path string) (parent, child string, err error) {
	parent, child, nested := strings.Cut(path, ".")
	switch {
	case parent == "" || nested && child == "":
		return "", "", fmt.Errorf("field path %q has an empty part", path)
	case strings.Contains(child, "."):
		return "", "", fmt.Errorf("field path %q is nested more than one level; use field or parent.child", path)
	}
	return parent, child, nil
}

// get returns the JSON value at path, and false when absent.
func (d Doc) get(path string) (json.RawMessage, bool) {
	parent, child, err := splitPath(path)
	if err != nil {
		return nil, false
	}
	v, ok := d[parent]
	if !ok || child == "" {
		return v, ok
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return nil, false
	}
	c, ok := obj[child]
	return c, ok
}

// filled reports whether a JSON value counts as an answer: present, not
// null and not the empty string.
func filled(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && string(t) != "null" && string(t) != `""`
}

// set stores raw at path through reducer r (applied to top-level fields; a
// nested child is always replaced).
func (d Doc) set(path string, raw json.RawMessage, r Reducer) error {
	parent, child, err := splitPath(path)
	if err != nil {
		return err
	}
	if child != "" {
		obj := map[string]json.RawMessage{}
		if cur, ok := d[parent]; ok && string(bytes.TrimSpace(cur)) != "null" {
			if err := json.Unmarshal(cur, &obj); err != nil {
				return fmt.Errorf("cannot set %s: %s is not an object", path, parent)
			}
		}
		obj[child] = raw
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("cannot set %s: %w", path, err)
		}
		d[parent] = b
		return nil
	}
	cur, exists := d[parent]
	if !exists || r == Replace || string(bytes.TrimSpace(cur)) == "null" {
		if r == Append && !isJSONArray(raw) {
			raw = json.RawMessage("[" + string(raw) + "]")
		}
		d[parent] = raw
		return nil
	}
	switch r {
	case Append:
		var list []json.RawMessage
		if err := json.Unmarshal(cur, &list); err != nil {
			return fmt.Errorf("cannot append to %s: it holds %s, not a list", path, jsonKind(cur))
		}
		if isJSONArray(raw) {
			var more []json.RawMessage
			if err := json.Unmarshal(raw, &more); err != nil {
				return fmt.Errorf("cannot append to %s: %w", path, err)
			}
			list = append(list, more...)
		} else {
			list = append(list, raw)
		}
		b, err := json.Marshal(list)
		if err != nil {
			return fmt.Errorf("cannot append to %s: %w", path, err)
		}
		d[parent] = b
	case Merge:
		var obj, more map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil || obj == nil {
			return fmt.Errorf("cannot merge into %s: it holds %s, not an object", path, jsonKind(cur))
		}
		if err := json.Unmarshal(raw, &more); err != nil || more == nil {
			return fmt.Errorf("cannot merge %s into object field %s; send an object", jsonKind(raw), path)
		}
		for k, v := range more {
			obj[k] = v
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("cannot merge into %s: %w", path, err)
		}
		d[parent] = b
	}
	return nil
}

// clear removes the value at path.
func (d Doc) clear(path string) {
	parent, child, err := splitPath(path)
	if err != nil {
		return
	}
	if child == "" {
		delete(d, parent)
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(d[parent], &obj) != nil || obj == nil {
		return
	}
	delete(obj, child)
	if b, err := json.Marshal(obj); err == nil {
		d[parent] = b
	}
}

func isJSONArray(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '['
}

func jsonKind(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// encodeValue checks that v survives a JSON round trip unchanged and encodes
// it. path names the value in errors ("state.draft").
func encodeValue(path string, v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s: not valid JSON", path)
		}
		return raw, nil
	}
	if err := checkJSON(path, reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

const maxDepth = 64

// errNotJSON is wrapped by every JSON invariant violation.
var errNotJSON = errors.New("value does not survive a JSON round trip")

// checkJSON walks v and reports the first value that encoding/json would
// reject or silently lose, naming its key path.
func checkJSON(path string, v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nested more than %d levels deep (a cycle?): %w", path, maxDepth, errNotJSON)
	}
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) && v.CanAddr() {
		return nil
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %v has no JSON form: %w", path, f, errNotJSON)
		}
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer, reflect.Uintptr:
		return fmt.Errorf("%s: a %s has no JSON form: %w", path, t, errNotJSON)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkJSON(path, v.Elem(), depth+1)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("%s: a map with %s keys comes back with string keys: %w", path, t.Key(), errNotJSON)
		}
		iter := v.MapRange()
		for iter.Next() {
			if err := checkJSON(path+"."+iter.Key().String(), iter.Value(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte encodes as base64
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkJSON(fmt.Sprintf("%s[%d]", path, i), v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, skip := jsonFieldName(f)
			if skip {
				continue
			}
			if !f.IsExported() && !f.Anonymous {
				return fmt.Errorf("%s.%s: unexported field of %s would be silently dropped: %w", path, f.Name, t, errNotJSON)
			}
			fv := v.Field(i)
			p := path + "." + name
			if f.Anonymous {
				p = path
			}
			if !f.IsExported() && f.Anonymous {
				// Embedded unexported struct: encoding/json promotes its exported fields.
				if fv.Kind() != reflect.Struct {
					return fmt.Errorf("%s: embedded unexported %s would be silently dropped: %w", path, f.Type, errNotJSON)
				}
			}
			if err := checkJSON(p, fv, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonFieldName(f reflect.StructField) (name string, skip bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	name, _, _ = strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, false
}
