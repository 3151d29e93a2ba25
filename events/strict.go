package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxDepth bounds the nesting checkDuplicateKeys walks, as encoding/json does.
const maxDepth = 10000

// CheckDuplicateKeys returns an *Error naming the first object key that
// appears twice in one object of data, for a reader of JSON other than an
// event (an HTTP body), and nil when none does or data is not JSON.
func CheckDuplicateKeys(data []byte) error { return duplicateKeys(data, "data") }

// checkDuplicateKeys returns an error naming the first object key that
// appears twice in one object of a JSON value. encoding/json keeps the last
// of duplicate keys; a message that says two things at once is refused
// instead of read one way here and another way elsewhere.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	_, err := walkValue(dec, "", 0)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// walkValue reads one value; path names it for the error.
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

type duplicateKeyError struct{ path string }

func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("key %q appears twice in one object; send each key once", e.path)
}
