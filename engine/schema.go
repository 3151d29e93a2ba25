package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	schemakind "github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/interlockhq/interlock/protocol"
)

// This file checks values against the JSON Schemas (draft 2020-12) that
// approvals give their args (argsSchema) and questions their answers
// (schema), with github.com/santhosh-tekuri/jsonschema: a schema is
// compiled when the interrupt is declared, and an edit or an answer that
// does not fit is refused invalid_answer naming the JSON path.

// maxSchemaSize bounds a schema's JSON: it travels in every interrupted
// event and checkpoint of the interrupt.
const maxSchemaSize = 64 << 10

// schemaURL is the location a schema is compiled under; it is never
// fetched.
const schemaURL = "urn:interlock:schema"

// schemas caches compiled schemas by the SHA-256 of their JSON, so that
// a schema declared on every run of a flow is compiled once.
var schemas struct {
	sync.Mutex
	byHash map[[32]byte]*jsonschema.Schema
}

// maxCachedSchemas bounds the cache; when full it starts again.
const maxCachedSchemas = 256

// compileSchema compiles a JSON Schema given as JSON. A schema that is
// not JSON, not an object, larger than 64 KiB, or not valid against the
// 2020-12 meta-schema is an error that says so; a $ref is resolved only
// within the schema (nothing is fetched or read from disk).
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) > maxSchemaSize {
		return nil, fmt.Errorf("the schema is %d bytes, more than %d", len(raw), maxSchemaSize)
	}
	if protocol.JSONTypeOf(raw) != protocol.JSONObject {
		return nil, fmt.Errorf("a schema is a JSON object, not %s", jsonKind(raw))
	}
	sum := sha256.Sum256(raw)
	schemas.Lock()
	sch, ok := schemas.byHash[sum]
	schemas.Unlock()
	if ok {
		return sch, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // load nothing: no network, no files
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("the schema cannot be read: %w", err)
	}
	sch, err = c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("the schema is not a JSON Schema (draft 2020-12): %s", schemaError(err))
	}
	schemas.Lock()
	if schemas.byHash == nil || len(schemas.byHash) >= maxCachedSchemas {
		schemas.byHash = map[[32]byte]*jsonschema.Schema{}
	}
	schemas.byHash[sum] = sch
	schemas.Unlock()
	return sch, nil
}

// schemaError says what is wrong with a schema, without the compiler's
// internal URL.
func schemaError(err error) string {
	var serr *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &serr) && errors.As(serr.Err, &verr) {
		if msg := violations(verr, ""); msg != "" {
			return msg
		}
	}
	return strings.ReplaceAll(err.Error(), schemaURL, "the schema")
}

// checkSchema checks a JSON value against a compiled schema. The error
// names each place that does not fit as a JSON pointer below prefix:
// "/amount: must be <= 4800".
func checkSchema(sch *jsonschema.Schema, value json.RawMessage, prefix string) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", cmpPath(prefix), err)
	}
	if err := sch.Validate(doc); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			if msg := violations(verr, prefix); msg != "" {
				return errors.New(msg)
			}
		}
		return fmt.Errorf("%s: %v", cmpPath(prefix), err)
	}
	return nil
}

func cmpPath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// maxViolations is how many places a refusal names.
const maxViolations = 3

// violations lists the leaves of a validation error, "<path>: <what>",
// joined by "; ".
func violations(verr *jsonschema.ValidationError, prefix string) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := fmt.Sprintf("%s: %s", cmpPath(prefix+pointer(e.InstanceLocation)), says(e.ErrorKind))
			for _, l := range leaves {
				if l == msg {
					return
				}
			}
			leaves = append(leaves, msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	if len(leaves) > maxViolations {
		leaves = append(leaves[:maxViolations], fmt.Sprintf("and %d more", len(leaves)-maxViolations))
	}
	return strings.Join(leaves, "; ")
}

// pointer is a JSON pointer of the tokens ("/items/0/name").
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

var printer = message.NewPrinter(language.English)

// says is a violation in words for the person who edited or answered.
func says(k jsonschema.ErrorKind) string {
	num := func(r *big.Rat) string {
		if r.IsInt() {
			return r.Num().String()
		}
		f, _ := r.Float64()
		return fmt.Sprint(f)
	}
	switch k := k.(type) {
	case *schemakind.Maximum:
		return "must be <= " + num(k.Want)
	case *schemakind.Minimum:
		return "must be >= " + num(k.Want)
	case *schemakind.ExclusiveMaximum:
		return "must be < " + num(k.Want)
	case *schemakind.ExclusiveMinimum:
		return "must be > " + num(k.Want)
	case *schemakind.MultipleOf:
		return "must be a multiple of " + num(k.Want)
	case *schemakind.MinLength:
		return fmt.Sprintf("must be at least %d characters", k.Want)
	case *schemakind.MaxLength:
		return fmt.Sprintf("must be at most %d characters", k.Want)
	case *schemakind.Type:
		return fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *schemakind.Required:
		return "missing " + strings.Join(k.Missing, ", ")
	case *schemakind.Format:
		return fmt.Sprintf("is not a valid %s", k.Want)
	case *schemakind.Pattern:
		return fmt.Sprintf("must match %s", k.Want)
	case *schemakind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			b, _ := json.Marshal(w)
			want[i] = string(b)
		}
		return "must be one of " + strings.Join(want, ", ")
	case *schemakind.Const:
		b, _ := json.Marshal(k.Want)
		return "must be " + string(b)
	case *schemakind.AdditionalProperties:
		return "may not have " + strings.Join(k.Properties, ", ")
	}
	return k.LocalizedString(printer)
}
