package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// seal chains the transition's new audit records onto the run's chain, in
// outbox order, before the checkpoint that holds them is written: each
// gets its position, the previous record's hash, its own hash and its
// signature, and the checkpoint keeps the head.
func (t *txn) seal() error {
	for i := range t.cp.Outbox {
		rec, ok := t.cp.Outbox[i].Data.(*AuditRecord)
		if !ok || rec.Hash != "" {
			continue
		}
		head := AuditHead{}
		if t.cp.Audit != nil {
			head = *t.cp.Audit
		}
		rec.Seq, rec.Prev = head.Records+1, head.Hash
		if err := t.r.signer.seal(rec); err != nil {
			return err
		}
		t.cp.Audit = &AuditHead{Records: rec.Seq, Hash: rec.Hash}
	}
	return nil
}

// AuditHash returns the hash of an audit record: the hex SHA-256 of its
// canonical JSON (object keys sorted, no insignificant space, numbers as
// written) without its hash and sig fields. Anyone can recompute it from
// the record as published. The hash covers the kid, naming the key, and
// the signature (sig) is over the hash.
func AuditHash(rec *AuditRecord) (string, error) {
	b, err := rec.appendCanonical(make([]byte, 0, 512))
	if err != nil {
		return "", fmt.Errorf("engine: encoding audit record: %w", err)
	}
	return hashHex(b), nil
}

// appendCanonical appends the record's canonical JSON without its hash
// and signature:
// what [CanonicalHash] hashes of the record as json.Marshal writes it,
// written directly (its members in key order).
func (e *AuditRecord) appendCanonical(dst []byte) ([]byte, error) {
	w := jsonWriter{b: dst, canonical: true}
	w.str(`{"action":`, e.Action)
	if a := e.Approval; a != nil {
		w.str(`,"approval":{"action":`, a.Action)
		w.canonicalRaw(`,"args":`, a.Args)
		w.canonicalRaw(`,"edits":`, a.Edits)
		w.canonicalRaw(`,"final":`, a.Final)
		w.lit("}")
	}
	w.strOmit(`,"approverRole":`, e.ApproverRole)
	w.time(`,"at":`, e.At)
	w.strOmit(`,"by":`, e.By)
	w.strOmit(`,"code":`, e.Code)
	w.strOmit(`,"escalatedFrom":`, e.EscalatedFrom)
	w.strOmit(`,"eventId":`, e.EventID)
	if e.ExpiresAt != nil {
		w.time(`,"expiresAt":`, *e.ExpiresAt)
	}
	w.str(`,"flow":`, e.Flow)
	w.strOmit(`,"kid":`, e.Kid)
	w.strOmit(`,"kind":`, e.Kind)
	w.strOmit(`,"node":`, e.Node)
	if o := e.Outcome; o != nil {
		w.lit(`,"outcome":`)
		n := len(w.b)
		w.strOmit(`,"error":`, o.Error)
		w.strOmit(`,"kind":`, o.Kind)
		w.strOmit(`,"node":`, o.Node)
		w.strOmit(`,"requestId":`, o.RequestID)
		w.str(`,"status":`, string(o.Status))
		w.b[n] = '{' // the first member's comma
		w.lit("}")
	}
	w.strOmit(`,"prev":`, e.Prev)
	w.strOmit(`,"reason":`, e.Reason)
	w.strOmit(`,"replaces":`, e.Replaces)
	w.strOmit(`,"requestId":`, e.RequestID)
	w.str(`,"run":`, e.Run)
	w.uintOmit(`,"seq":`, e.Seq)
	w.boolOmit(`,"side":`, e.Side)
	w.strOmit(`,"source":`, e.Source)
	w.boolOmit(`,"timeout":`, e.Timeout)
	w.boolOmit(`,"trusted":`, e.Trusted)
	w.lit("}")
	return w.b, w.err
}

// CanonicalHash returns the hex SHA-256 of the canonical JSON of a JSON
// object, leaving out its "hash" and "sig" members (an audit record's hash
// and the signature over it).
//
// The canonical JSON is what encoding/json writes for the object decoded
// into a map (with numbers kept as written): keys sorted, the last of a
// repeated key kept, strings escaped as encoding/json escapes them. A
// valid object is written so in one pass; anything else is decoded.
func CanonicalHash(obj []byte) (string, error) {
	if json.Valid(obj) {
		c := canonicalizer{dst: make([]byte, 0, len(obj))}
		if b, ok := c.object(bytes.TrimSpace(obj), true); ok {
			return hashHex(b), nil
		}
	}
	return canonicalHashDecoded(obj)
}

// canonicalHashDecoded is CanonicalHash by decoding the object into a map
// and encoding it again.
func canonicalHashDecoded(obj []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", fmt.Errorf("engine: audit record is not a JSON object: %v", err)
	}
	delete(m, "hash")
	delete(m, "sig")
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("engine: encoding audit record: %w", err)
	}
	return hashHex(b), nil
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalizer writes valid JSON in canonical form.
type canonicalizer struct {
	dst []byte
}

// member is one member of an object: its key, decoded, and its value.
type member struct {
	key   []byte
	value []byte
}

// object writes the canonical form of the valid JSON object src, without
// its "hash" and "sig" members if top, and returns the bytes written so far. It
// reports false if src is not an object.
func (c *canonicalizer) object(src []byte, top bool) ([]byte, bool) {
	if len(src) == 0 || src[0] != '{' {
		return nil, false
	}
	var members []member
	i := skipSpace(src, 1)
	for src[i] != '}' {
		end := skipString(src, i)
		key := decodeString(src[i:end])
		i = skipSpace(src, end)
		i = skipSpace(src, i+1) // :
		end = skipValue(src, i)
		if !top || !unhashed(key) {
			members = append(members, member{key: key, value: src[i:end]})
		}
		i = skipSpace(src, end)
		if src[i] == ',' {
			i = skipSpace(src, i+1)
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

// unhashed reports whether a top-level member is left out of an audit
// record's hash: the hash itself and the signature over it.
func unhashed(key []byte) bool { return string(key) == "hash" || string(key) == "sig" }

// value writes the canonical form of the valid JSON value src.
func (c *canonicalizer) value(src []byte) {
	switch src[0] {
	case '{':
		c.object(src, false)
	case '[':
		c.dst = append(c.dst, '[')
		for i, first := skipSpace(src, 1), true; src[i] != ']'; first = false {
			end := skipValue(src, i)
			if !first {
				c.dst = append(c.dst, ',')
			}
			c.value(src[i:end])
			i = skipSpace(src, end)
			if src[i] == ',' {
				i = skipSpace(src, i+1)
			}
		}
		c.dst = append(c.dst, ']')
	case '"':
		c.dst = appendCanonicalString(c.dst, decodeString(src))
	default: // numbers as written, literals
		c.dst = append(c.dst, src...)
	}
}

// skipSpace returns the index of the first byte of src from i that is not
// JSON whitespace.
func skipSpace(src []byte, i int) int {
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
