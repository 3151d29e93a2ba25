package jsonw

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendStringEscapesAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "é中文", "<>&", "\u2028", "\u2029x", "\xff", "a\xe2\x80", "\x00\x1f\x7f", `"\`,
		strings.Repeat("é", 40) + "\xc3"} {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}
