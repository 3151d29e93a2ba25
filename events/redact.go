package events

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces a resume token in a dead letter.
const Redacted = "[redacted]"

// tokenPattern finds a resume token in a body that is not valid JSON.
var tokenPattern = regexp.MustCompile(`(?i)("resume_?token"\s*:\s*)"(?:[^"\\]|\\.)*"?`)

// RedactTokens returns body with the value of every "resumeToken" key, at
// any depth and in any letter case (encoding/json matches keys without
// regard to case), replaced by "[redacted]", and every other byte as it
// was. A body that is not valid JSON is redacted by pattern.
func RedactTokens(body []byte) []byte {
	if !bytes.Contains(bytes.ToLower(body), []byte("token")) {
		return body
	}
	spans, ok := tokenSpans(body)
	if !ok {
		return tokenPattern.ReplaceAll(body, []byte(`${1}"`+Redacted+`"`))
	}
	if len(spans) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	last := 0
	for _, s := range spans {
		out = append(out, body[last:s[0]]...)
		out = append(out, `"`+Redacted+`"`...)
		last = s[1]
	}
	return append(out, body[last:]...)
}

// tokenSpans returns the byte ranges of the values of resumeToken keys; ok
// is false when body is not valid JSON.
func tokenSpans(body []byte) (spans [][2]int, ok bool) {
	if !json.Valid(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// stack holds, per open container, whether it is an object and, if so,
	// whether a key comes next.
	type level struct{ object, key bool }
	var stack []level
	done := func() { // a value ended: in an object, a key comes next
		if top := len(stack) - 1; top >= 0 && stack[top].object {
			stack[top].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return spans, true
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].key {
			if tok == json.Delim('}') {
				stack = stack[:top]
				done()
				continue
			}
			stack[top].key = false
			if k, _ := tok.(string); strings.EqualFold(k, "resumeToken") || strings.EqualFold(k, "resume_token") {
				start := int(dec.InputOffset())
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return nil, false
				}
				end := int(dec.InputOffset())
				lead := bytes.TrimLeft(body[start:end], ": \t\r\n")
				spans = append(spans, [2]int{end - len(lead), end})
				done()
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{object: true, key: true})
		case json.Delim('['):
			stack = append(stack, level{})
		case json.Delim(']'):
			stack = stack[:top]
			done()
		default:
			done()
		}
	}
}

// TokenHeader reports whether a message header may carry a resume token:
// its name, without regard to letter case, '-' and '_', contains
// "resumetoken" (ce-resumetoken, a binary-mode event's resumeToken
// extension; Resume-Token). A dead letter keeps such a header redacted.
func TokenHeader(name string) bool {
	n := strings.ToLower(name)
	n = strings.ReplaceAll(n, "-", "")
	n = strings.ReplaceAll(n, "_", "")
	return strings.Contains(n, "resumetoken")
}

// credentialWords are what a header's name contains, without regard to
// letter case, '-' and '_', when its value may be a credential.
var credentialWords = [...]string{"resumetoken", "authorization", "cookie", "token", "secret", "passw", "apikey", "credential", "privatekey", "session"}

// CredentialHeader reports whether a message header may carry a
// credential: a resume token ([TokenHeader]), or, by its name, a bearer
// token, a cookie, an API key, a password or a secret (Authorization,
// Proxy-Authorization, Cookie, X-Api-Key, X-Auth-Token, ...). A dead
// letter keeps such a header redacted.
func CredentialHeader(name string) bool {
	n := strings.ToLower(name)
	n = strings.ReplaceAll(n, "-", "")
	n = strings.ReplaceAll(n, "_", "")
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
