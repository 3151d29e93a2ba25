package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// walkDuplicateKeys is checkDuplicateKeys as it was, on encoding/json's
// tokenizer: the tests hold the scanner to what it reported.
func walkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	_, err := walkValue(dec, "", 0)
	if errors.Is(err, io.EOF) {
		return nil
	}
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		return dup
	}
	return nil
}

func walkValue(dec *json.Decoder, path string, depth int) (json.Token, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("JSON nests deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			child := k
			if path != "" {
				child = path + "." + k
			}
			if seen[k] {
				return nil, &duplicateKeyError{path: child}
			}
			seen[k] = true
			if _, err := walkValue(dec, child, depth+1); err != nil {
				return nil, err
			}
		}
		_, err = dec.Token()
		return tok, err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if _, err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return nil, err
			}
		}
		_, err = dec.Token()
		return tok, err
	}
	return tok, nil
}

// sameScan checks that the scanner reports the repeated key the
// tokenizer walk reported, and validity as json.Valid does.
func sameScan(t *testing.T, data []byte) {
	t.Helper()
	s := scanner{data: data}
	s.scan()
	want := walkDuplicateKeys(data)
	got := checkDuplicateKeys(data)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%q: scanner says %v, the tokenizer %v", data, got, want)
	}
	if !s.repeated && s.valid != json.Valid(data) {
		t.Fatalf("%q: scanner says valid %v, json.Valid %v", data, s.valid, json.Valid(data))
	}
}

func TestScannerFindsWhatTheTokenizerFound(t *testing.T) {
	deep := func(n int, inner string) string {
		return strings.Repeat(`{"a":`, n) + inner + strings.Repeat("}", n)
	}
	for _, data := range []string{
		``, ` `, `{}`, `[]`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`,
		`{"":{"a":1,"a":1}}`, `{"x":{"":{"":1,"":2}}}`, `[{"a":1},{"a":1,"a":2}]`, "{\"\xff\":1,\"\xfe\":2}",
		`{"a":1,"a"`, `{"a":1 "a":2}`, `{"a" 1,"a":2}`, `{"a":01,"a":2}`, `{"a":-,"a":2}`, `{"a":tru,"a":2}`,
		`{"a":1}{"a":1,"a":1}`, `{"a":"\x01","a":1}`, `{"a":"\q","a":1}`, `{"a":"\u12","a":1}`, `{"a":1,}`, `[1,]`,
		`{"a":1e5,"b":-0.5E-3,"c":[true,false,null],"d":"\"\\\/\b\f\n\r\t\u00e9"}`, `1.`, `-`, `.5`, `1e`, `"a`, `nul`,
		deep(maxDepth, `1`), deep(maxDepth+1, `1`), deep(maxDepth, `{}`), deep(maxDepth, `{"b":1,"b":2}`),
		deep(maxDepth-1, `{"b":1,"b":2}`), strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k17":7,"k3":8}`,
	} {
		sameScan(t, []byte(data))
	}
}

// FuzzScanner holds the scanner to the tokenizer walk it replaced and to
// json.Valid.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":1,"c":2}]}}`))
	f.Add([]byte(`{"a":1,"\u0061":2}`))
	f.Add([]byte("{\"\xff\":1,\"\xfe\":2}"))
	f.Add([]byte(`[{"":{"":1,"":2}}]`))
	f.Add([]byte(`{"a":-0.5E-3,"b":[true,false,null],"c":"\"\\\/\b\f\n\r\t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameScan(t, data)
	})
}
