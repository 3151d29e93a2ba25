package authority

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/interlockhq/interlock/protocol"
)

// Tell is what every surface that shows a refusal to the person refused
// (Slack, the inbox and its decision links) tells them: the refusal's own
// message, which names what was wrong (the claimant of a claimed
// approval, the role it takes, the argument that does not fit), as one
// sentence; first that the request no longer waits, when that is why.
func Tell(ref protocol.Refused) string {
	switch ref.Code {
	case protocol.CodeTokenMismatch, protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeUnknownRun:
		return "This request is no longer waiting: " + ref.Message
	}
	return Sentence(ref.Message)
}

// Sentence is s begun with a capital letter and ended with a full stop.
func Sentence(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:] + "."
}
