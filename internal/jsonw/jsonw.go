// Package jsonw writes JSON as encoding/json does, without reflection, and
// the canonical JSON of a value (keys sorted, numbers as written) that
// Interlock's audit hash is computed over. It uses the standard library
// only.
package jsonw

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Canonical appends to dst the canonical form of the valid JSON object
// src (the members sorted by key, the last of a repeated key kept, strings
// escaped and numbers written as encoding/json writes a value decoded into
// a map with numbers kept as written), leaving out the top-level members
// omit names (omit may be nil). It reports false when src is not a JSON
// object; src must be valid JSON.
func Canonical(dst, src []byte, omit func(key string) bool) ([]byte, bool) {
	c := canonicalizer{dst: dst, omit: omit}
	return c.object(bytes.TrimSpace(src), true)
}

// Writer appends JSON to B; the first error stops it. Each method
// writes its prefix (a member's `,"name":`) and then the value, as
// encoding/json writes it.
type Writer struct {
	// B is what was written so far.
	B []byte
	// Err is the first error; once set, writing stops.
	Err error
	// Canonical writes strings as the canonical form has them: invalid
	// UTF-8 replaced by U+FFFD itself, not escaped (see [Canonical]).
	Canonical bool
}

// Lit writes s as it is.
func (w *Writer) Lit(s string) { w.B = append(w.B, s...) }

// Sep writes open before a list's first element and a comma before the
// others.
func (w *Writer) Sep(i int, open byte) {
	if i == 0 {
		w.B = append(w.B, open)
	} else {
		w.B = append(w.B, ',')
	}
}

// Str writes prefix and s as a JSON string.
func (w *Writer) Str(prefix, s string) {
	if w.Canonical && !utf8.ValidString(s) {
		s = string([]rune(s)) // each invalid byte a U+FFFD, as encoding/json decodes it
	}
	w.B = AppendString(append(w.B, prefix...), s)
}

// StrOmit is Str, unless s is empty.
func (w *Writer) StrOmit(prefix, s string) {
	if s != "" {
		w.Str(prefix, s)
	}
}

// StrsOmit writes prefix and ss as a JSON array, unless ss is empty.
func (w *Writer) StrsOmit(prefix string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.Lit(prefix)
	for i, s := range ss {
		w.Sep(i, '[')
		w.B = AppendString(w.B, s)
	}
	w.Lit("]")
}

// Uint writes prefix and n.
func (w *Writer) Uint(prefix string, n uint64) {
	w.B = strconv.AppendUint(append(w.B, prefix...), n, 10)
}

// UintOmit is Uint, unless n is 0.
func (w *Writer) UintOmit(prefix string, n uint64) {
	if n != 0 {
		w.Uint(prefix, n)
	}
}

// Int writes prefix and n.
func (w *Writer) Int(prefix string, n int64) {
	w.B = strconv.AppendInt(append(w.B, prefix...), n, 10)
}

// Bool writes v.
func (w *Writer) Bool(v bool) {
	w.B = strconv.AppendBool(w.B, v)
}

// BoolOmit writes prefix and true, if v.
func (w *Writer) BoolOmit(prefix string, v bool) {
	if v {
		w.Lit(prefix)
		w.Bool(v)
	}
}

// Time writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds; an error for a year outside 0-9999).
func (w *Writer) Time(prefix string, t time.Time) {
	w.B = append(append(w.B, prefix...), '"')
	b, err := t.AppendText(w.B)
	if err != nil {
		w.Fail(err)
		return
	}
	w.B = append(b, '"')
}

// Raw writes a raw JSON value as json.Marshal does: nil as null, and a
// value with space or HTML characters in it compacted and escaped.
func (w *Writer) Raw(r json.RawMessage) {
	switch {
	case r == nil:
		w.Lit("null")
	case rawClean(r) && json.Valid(r):
		w.B = append(w.B, r...)
	default:
		w.Value("", r)
	}
}

// RawOmit is Raw after prefix, unless r is empty.
func (w *Writer) RawOmit(prefix string, r json.RawMessage) {
	if len(r) > 0 {
		w.Lit(prefix)
		w.Raw(r)
	}
}

// CanonicalRaw writes a raw value, unless empty, in canonical form (see
// [Canonical]).
func (w *Writer) CanonicalRaw(prefix string, r json.RawMessage) {
	if len(r) == 0 || w.Err != nil {
		return
	}
	compact := Writer{}
	if compact.Raw(r); compact.Err != nil {
		w.Fail(compact.Err)
		return
	}
	c := canonicalizer{dst: append(w.B, prefix...)}
	c.value(compact.B)
	w.B = c.dst
}

// RawMap writes a map of raw values with its keys in order; a nil map is
// null, or left out with omit, as an empty one is.
func (w *Writer) RawMap(prefix string, m map[string]json.RawMessage, omit bool) {
	if omit && len(m) == 0 {
		return
	}
	w.Lit(prefix)
	if m == nil {
		w.Lit("null")
		return
	}
	if len(m) == 0 {
		w.Lit("{}")
		return
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		w.Sep(i, '{')
		w.B = append(AppendString(w.B, k), ':')
		w.Raw(m[k])
	}
	w.Lit("}")
}

// Value writes prefix and v with json.Marshal.
func (w *Writer) Value(prefix string, v any) {
	if w.Err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.Fail(err)
		return
	}
	w.B = append(append(w.B, prefix...), b...)
}

// Fail records err, unless an error was recorded already.
func (w *Writer) Fail(err error) {
	if w.Err == nil {
		w.Err = err
	}
}

// rawClean reports whether a raw value, if valid, is as json.Marshal
// writes it: no space to compact, no character it escapes.
func rawClean(r []byte) bool {
	for _, c := range r {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// AppendString appends s quoted as encoding/json writes a string:
// HTML characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return appendJSONStringSlow(dst, s)
			}
			i += n
			continue
		}
		if c < ' ' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSONStringSlow(dst, s)
		}
		i++
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendJSONStringSlow is appendJSONString for a string with something to
// escape.
func appendJSONStringSlow(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}

// canonicalizer writes valid JSON in canonical form.
type canonicalizer struct {
	dst []byte
	// omit, if set, leaves top-level members out.
	omit func(key string) bool
}

// member is one member of an object: its key, decoded, and its value.
type member struct {
	key   []byte
	value []byte
}

// object writes the canonical form of the valid JSON object src, without
// the top-level members omit names, and returns the bytes written so far. It
// reports false if src is not an object.
func (c *canonicalizer) object(src []byte, top bool) ([]byte, bool) {
	if len(src) == 0 || src[0] != '{' {
		return nil, false
	}
	var members []member
	i := SkipSpace(src, 1)
	for src[i] != '}' {
		end := skipString(src, i)
		key := decodeString(src[i:end])
		i = SkipSpace(src, end)
		i = SkipSpace(src, i+1) // :
		end = skipValue(src, i)
		if !top || c.omit == nil || !c.omit(string(key)) {
			members = append(members, member{key: key, value: src[i:end]})
		}
		i = SkipSpace(src, end)
		if src[i] == ',' {
			i = SkipSpace(src, i+1)
		}
	}
	// Sorted by key; of a repeated key, the last is kept, as a map keeps
	// the last.
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.dst = append(c.dst, '{')
	first := true
	for j, m := range members {
		if j+1 < len(members) && bytes.Equal(members[j+1].key, m.key) {
			continue
		}
		if !first {
			c.dst = append(c.dst, ',')
		}
		first = false
		c.dst = appendCanonicalString(c.dst, m.key)
		c.dst = append(c.dst, ':')
		c.value(m.value)
	}
	c.dst = append(c.dst, '}')
	return c.dst, true
}

// value writes the canonical form of the valid JSON value src.
func (c *canonicalizer) value(src []byte) {
	switch src[0] {
	case '{':
		c.object(src, false)
	case '[':
		c.dst = append(c.dst, '[')
		for i, first := SkipSpace(src, 1), true; src[i] != ']'; first = false {
			end := skipValue(src, i)
			if !first {
				c.dst = append(c.dst, ',')
			}
			c.value(src[i:end])
			i = SkipSpace(src, end)
			if src[i] == ',' {
				i = SkipSpace(src, i+1)
			}
		}
		c.dst = append(c.dst, ']')
	case '"':
		c.dst = appendCanonicalString(c.dst, decodeString(src))
	default: // numbers as written, literals
		c.dst = append(c.dst, src...)
	}
}

// SkipSpace returns the index of the first byte of src from i that is not
// JSON whitespace.
func SkipSpace(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the valid JSON string at i.
func skipString(src []byte, i int) int {
	for i++; src[i] != '"'; i++ {
		if src[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index just past the valid JSON value at i.
func skipValue(src []byte, i int) int {
	switch src[i] {
	case '"':
		return skipString(src, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch src[i] {
			case '"':
				i = skipString(src, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(src) && !strings.ContainsRune(",]} \t\n\r", rune(src[i])) {
		i++
	}
	return i
}

// decodeString returns the valid JSON string token s decoded, as
// encoding/json decodes it (invalid UTF-8 replaced).
func decodeString(s []byte) []byte {
	raw := s[1 : len(s)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var v string
	_ = json.Unmarshal(s, &v) // s is a valid string
	return []byte(v)
}

// appendCanonicalString appends s as encoding/json writes a string (HTML
// characters, U+2028 and U+2029 escaped).
func appendCanonicalString(dst, s []byte) []byte {
	clean := utf8.Valid(s)
	for i := 0; clean && i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ', c == '"', c == '\\', c == '<', c == '>', c == '&', c == 0xE2:
			clean = false
		}
	}
	if clean {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(string(s)) // a string always encodes
	return append(dst, b...)
}
