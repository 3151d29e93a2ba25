package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds the nesting checkDuplicateKeys walks, as encoding/json
// bounds what it decodes.
const maxDepth = 10000

// CheckDuplicateKeys returns an *Error naming the first object key that
// appears twice in one object of data, for a reader of JSON other than an
// event (an HTTP body), and nil when none does or data is not JSON.
func CheckDuplicateKeys(data []byte) error { return duplicateKeys(data, "data") }

// checkDuplicateKeys returns an error naming the first object key that
// appears twice in one object of a JSON value. encoding/json keeps the last
// of duplicate keys; a message that says two things at once is refused
// instead of read one way here and another way elsewhere.
//
// Keys are compared as decoded ("\u0061" is "a"). Only the first value of
// data is read, up to its first syntax error or a value nested deeper than
// maxDepth: a key seen twice before either is reported.
func checkDuplicateKeys(data []byte) error {
	s := scanner{data: data}
	s.scan()
	if s.repeated {
		return &duplicateKeyError{path: s.dup}
	}
	return nil
}

type duplicateKeyError struct{ path string }

func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("key %q appears twice in one object; send each key once", e.path)
}

// scanner reads one JSON value in a single pass, checking its syntax as
// encoding/json does and the keys of each of its objects for a repeat.
type scanner struct {
	data []byte
	i    int
	// top, if set, is called with every member of a top-level object:
	// its key, decoded, and the first byte of its value.
	top func(key []byte, value byte)

	// repeated is set when a key appears twice in one object, and dup is
	// then the path of the first such key ("a.b[2].c").
	repeated bool
	dup      string
	// valid is set when data is one JSON value, with only whitespace
	// around it, that encoding/json decodes (deep is then false).
	valid bool
	// deep is set when a container is nested deeper than encoding/json
	// takes.
	deep bool
	// path is where the scanner is: object keys and array indexes.
	path []pathElem
}

// pathElem is one step of a path: an object key, or an array index when
// key is nil.
type pathElem struct {
	key   []byte
	index int
}

// scan reads data, setting dup, valid and deep.
func (s *scanner) scan() {
	s.space()
	if s.i == len(s.data) {
		return
	}
	if !s.value(0) {
		return
	}
	s.space()
	s.valid = s.i == len(s.data) && !s.deep
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads the value at s.i, at nesting depth. It returns false on a
// syntax error, a value nested deeper than maxDepth, or a repeated key.
func (s *scanner) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	if s.i == len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		if depth == maxDepth {
			s.deep = true
		}
		return s.object(depth)
	case c == '[':
		if depth == maxDepth {
			s.deep = true
		}
		return s.array(depth)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() bool {
	if s.data[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i == len(s.data):
		return false
	case s.data[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// str reads a string and returns it as written, quotes included.
func (s *scanner) str() ([]byte, bool) {
	start := s.i
	s.i++
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.data[start:s.i], true
		case c == '\\':
			s.i++
			if s.i == len(s.data) {
				return nil, false
			}
			switch s.data[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if s.i == len(s.data) || !isHex(s.data[s.i]) {
						return nil, false
					}
					s.i++
				}
			default:
				return nil, false
			}
		case c < ' ':
			return nil, false
		default:
			s.i++
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// decodedKey returns a key as encoding/json decodes it: escapes resolved,
// invalid UTF-8 replaced.
func decodedKey(quoted []byte) []byte {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var k string
	if json.Unmarshal(quoted, &k) != nil {
		return raw // not reached: str read a valid string
	}
	return []byte(k)
}

func (s *scanner) object(depth int) bool {
	s.i++ // {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return true
	}
	// Small objects are the rule: keys are kept in a slice, and in a map
	// only past a few.
	var (
		keys [][]byte
		seen map[string]bool
	)
	for {
		if s.i == len(s.data) || s.data[s.i] != '"' {
			return false
		}
		quoted, ok := s.str()
		if !ok {
			return false
		}
		key := decodedKey(quoted)
		repeat := false
		if seen != nil {
			repeat = seen[string(key)]
			seen[string(key)] = true
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					repeat = true
					break
				}
			}
			keys = append(keys, key)
			if len(keys) > 16 {
				seen = make(map[string]bool, 2*len(keys))
				for _, k := range keys {
					seen[string(k)] = true
				}
			}
		}
		s.path = append(s.path, pathElem{key: key})
		if repeat {
			s.repeated, s.dup = true, s.pathString()
			return false
		}
		s.space()
		if s.i == len(s.data) || s.data[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if depth == 0 && s.top != nil && s.i < len(s.data) {
			s.top(key, s.data[s.i])
		}
		if !s.value(depth + 1) {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.i == len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) array(depth int) bool {
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return true
	}
	for n := 0; ; n++ {
		s.path = append(s.path, pathElem{index: n})
		if !s.value(depth + 1) {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.i == len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// pathString names where the scanner is: keys joined with dots, indexes
// in brackets ("a.b[2].c"). A key follows what comes before it with a dot
// unless nothing does (as after an empty key).
func (s *scanner) pathString() string {
	var b strings.Builder
	for _, e := range s.path {
		if e.key == nil {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(e.key)
	}
	return b.String()
}
