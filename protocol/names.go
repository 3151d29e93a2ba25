package protocol

import (
	"fmt"
	"unicode/utf8"
)

// MaxNameLen is the longest flow name, run id or approver role.
const MaxNameLen = 128

// CheckName reports whether s is a valid flow name, run id or approver
// role: 1 to 128 of A-Z, a-z, 0-9, '_' and '-', so that it is one NATS
// subject token and one KV key token. what names the thing checked in the
// error ("flow", "run"). Names are never rewritten: a bad one is an error
// that says why.
func CheckName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s name is empty: use 1 to %d of A-Z a-z 0-9 _ -", what, MaxNameLen)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s name is %d characters long: use at most %d of A-Z a-z 0-9 _ -", what, len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			continue
		}
		return fmt.Errorf("%s name %q has %q at byte %d: use only A-Z a-z 0-9 _ - (names are NATS subject tokens)", what, Truncate(s, 40), c, i)
	}
	return nil
}

// Truncate cuts s to at most n bytes, on a rune boundary, and marks the
// cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
