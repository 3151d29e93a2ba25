package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/interlockhq/interlock/protocol"
)

// Limits of what an approval says for the person who decides it.
const (
	maxTitle       = 200
	maxDescription = 16 << 10
	maxRequester   = 256
)

// card is what an approval says for the person who decides it, besides
// its action and args (PROTOCOL.md §3, v1.1).
type card struct {
	Title, Description, Requester string
	ArgsSchema                    json.RawMessage
}

// setCard checks an approval's card and puts it on the interrupt: a
// title of one line, a description and a requester of bounded length,
// and an args schema that compiles.
func (in *Interrupt) setCard(c card) error {
	switch {
	case strings.ContainsAny(c.Title, "\r\n"):
		return errors.New("the title is one line: put the rest in the description")
	case len(c.Title) > maxTitle:
		return fmt.Errorf("the title is %d bytes, more than %d: put the rest in the description", len(c.Title), maxTitle)
	case len(c.Description) > maxDescription:
		return fmt.Errorf("the description is %d bytes, more than %d", len(c.Description), maxDescription)
	case len(c.Requester) > maxRequester || strings.ContainsAny(c.Requester, "\r\n"):
		return fmt.Errorf("the requester is one line of at most %d bytes", maxRequester)
	case !utf8.ValidString(c.Title + c.Description + c.Requester):
		return errors.New("the title, description and requester must be UTF-8 text")
	}
	if len(c.ArgsSchema) > 0 {
		if err := CheckArgsSchema(c.ArgsSchema); err != nil {
			return fmt.Errorf("argsSchema: %w", err)
		}
		c.ArgsSchema = compact(c.ArgsSchema)
	}
	in.Title, in.Description, in.Requester, in.ArgsSchema = strings.TrimSpace(c.Title), c.Description, strings.TrimSpace(c.Requester), c.ArgsSchema
	return nil
}

// CheckArgsSchema reports what is wrong with an approval's argsSchema, as
// an approval declaring it would: a schema that is not JSON Schema (draft
// 2020-12), larger than 64 KiB, or not of an object is an error that says
// so. Rule sets call it when they load, so that a rule's schema never
// fails a run later.
func CheckArgsSchema(schema json.RawMessage) error {
	if _, err := compileSchema(schema); err != nil {
		return err
	}
	if t := protocol.SchemaType(schema); t != "" && t != protocol.JSONObject {
		return fmt.Errorf("the args are a JSON object, but the schema's type is %s", t)
	}
	return nil
}

// checkArgs checks an approval's final args against its schema, if it
// has one: an edit that breaks it is refused, naming the path.
func (in *Interrupt) checkArgs(final map[string]json.RawMessage) error {
	if len(in.ArgsSchema) == 0 {
		return nil
	}
	sch, err := compileSchema(in.ArgsSchema)
	if err != nil {
		return fmt.Errorf("the approval's argsSchema: %w", err)
	}
	raw, err := json.Marshal(final)
	if err != nil {
		return err
	}
	return checkSchema(sch, raw, "")
}

// checkAnswer checks a question's answer against its schema, if it has
// one; the path starts with the field ("/email: is not a valid email").
func (q *Question) checkAnswer(answer json.RawMessage) error {
	if len(q.Schema) == 0 {
		return nil
	}
	sch, err := compileSchema(q.Schema)
	if err != nil {
		return fmt.Errorf("the schema of %s: %w", q.Field, err)
	}
	return checkSchema(sch, answer, pointer([]string{q.Field}))
}

// compact returns raw without insignificant space, or raw when it is
// not JSON.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
