// Package schematest validates JSON against Interlock's JSON Schemas
// (docs/schema) with a JSON Schema 2020-12 validator. Only tests import it,
// so the validator is never built into Interlock's binaries.
//
//	set := schematest.Load(t)
//	if err := set.ValidateEvent(ev.Type(), ev.Data()); err != nil {
//		t.Error(err)
//	}
package schematest

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/interlockhq/interlock/docs"
)

// Compiler returns a compiler that knows every file of docs/schema under
// its $id ([docs.Base] and the file name), with formats asserted, so that
// references between the schemas resolve with no network. Its default
// draft is 2020-12.
func Compiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	// Nothing is fetched: a reference outside docs/schema is an error.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	files, err := fs.Glob(docs.FS(), "schema/*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := fs.ReadFile(docs.FS(), f)
		if err != nil {
			return nil, err
		}
		doc, err := Decode(b)
		if err != nil {
			return nil, fmt.Errorf("schematest: %s: %w", f, err)
		}
		if err := c.AddResource(docs.Base()+path.Base(f), doc); err != nil {
			return nil, fmt.Errorf("schematest: %s: %w", f, err)
		}
	}
	return c, nil
}

// Decode reads JSON as the validator wants it (numbers as json.Number).
func Decode(data []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

// Set is every schema of the index, compiled.
type Set struct {
	byName map[string]*jsonschema.Schema
	types  map[string]string // CloudEvent type (or its prefix, for patterns) to schema name
}

// Load compiles every schema the index lists. It fails the test if one
// does not compile.
func Load(t testing.TB) *Set {
	t.Helper()
	c, err := Compiler()
	if err != nil {
		t.Fatal(err)
	}
	s := &Set{byName: map[string]*jsonschema.Schema{}, types: map[string]string{}}
	for _, e := range docs.Index() {
		sch, err := c.Compile(docs.Base() + e.File)
		if err != nil {
			t.Fatalf("schematest: compiling %s: %v", e.File, err)
		}
		s.byName[e.Name] = sch
		if e.Type != "" {
			typ, _, _ := strings.Cut(e.Type, "{")
			s.types[typ] = e.Name
		}
	}
	return s
}

// Validate validates data against the schema called name.
func (s *Set) Validate(name string, data []byte) error {
	sch, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("schematest: no schema %q", name)
	}
	v, err := Decode(data)
	if err != nil {
		return fmt.Errorf("schematest: %s: not JSON: %w", name, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("schematest: %s: %w", name, err)
	}
	return nil
}

// NameOf returns the name of the schema of the data of CloudEvent type
// typ, and false if no schema describes it.
func (s *Set) NameOf(typ string) (string, bool) {
	if name, ok := s.types[typ]; ok {
		return name, true
	}
	for prefix, name := range s.types {
		if strings.HasSuffix(prefix, ".") && strings.HasPrefix(typ, prefix) {
			return name, true
		}
	}
	return "", false
}

// ValidateEvent validates the data of an event of CloudEvent type typ
// against its schema.
func (s *Set) ValidateEvent(typ string, data []byte) error {
	name, ok := s.NameOf(typ)
	if !ok {
		return fmt.Errorf("schematest: no schema for the data of %s", typ)
	}
	return s.Validate(name, data)
}
