package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/docs"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/schematest"
	"github.com/interlockhq/interlock/protocol"
)

// binding ties a schema to the Go code that reads and writes its data.
type binding struct {
	// types read or write the data: the schema's properties are exactly
	// the union of their JSON fields, at every level of nesting.
	types []reflect.Type
	// strict are the types every example decodes into with unknown
	// fields refused; nil means types. Inbound data is read by parse
	// alone, which is strict itself.
	strict []reflect.Type
	// parse is the decoder Interlock reads the data with, if any.
	parse func([]byte) error
}

func typesOf(vs ...any) []reflect.Type {
	ts := make([]reflect.Type, len(vs))
	for i, v := range vs {
		ts[i] = reflect.TypeOf(v)
	}
	return ts
}

func parser[T any](parse func([]byte) (T, error)) func([]byte) error {
	return func(b []byte) error { _, err := parse(b); return err }
}

var noStrict = []reflect.Type{}

// bindings lists every schema of the index but the shared ones.
var bindings = map[string]binding{
	"start":          {types: typesOf(protocol.Start{}), strict: noStrict, parse: parser(events.ParseStart)},
	"resume":         {types: typesOf(protocol.Resume{}), strict: noStrict, parse: parser(events.ParseResume)},
	"cancel":         {types: typesOf(protocol.Cancel{}), strict: noStrict, parse: parser(events.ParseCancel)},
	"reannounce":     {types: typesOf(protocol.Reannounce{}), strict: noStrict, parse: parser(events.ParseReannounce)},
	"migrate":        {types: typesOf(protocol.Migrate{}), strict: noStrict, parse: parser(events.ParseMigrate)},
	"tool-requested": {types: typesOf(protocol.ToolRequest{}), strict: noStrict, parse: parser(events.ParseToolRequest)},
	"consume":        {types: typesOf(protocol.Consume{}), strict: typesOf(protocol.Consume{}), parse: parser(events.ParseConsume)},
	"ask-requested":  {types: typesOf(protocol.AskRequest{}), strict: noStrict, parse: parser(events.ParseAsk)},
	"expire":         {types: typesOf(protocol.Expire{}), strict: typesOf(protocol.Expire{}), parse: parser(events.ParseExpire)},
	"remind":         {types: typesOf(protocol.Remind{}), strict: typesOf(protocol.Remind{}), parse: parser(events.ParseRemind)},
	"assign":         {types: typesOf(protocol.Assign{}), strict: noStrict, parse: parser(events.ParseAssign)},
	"started":        {types: typesOf(protocol.Started{})},
	"interrupted":    {types: typesOf(protocol.Interrupted{})},
	"resumed":        {types: typesOf(protocol.Resumed{})},
	"completed":      {types: typesOf(protocol.Completed{})},
	"failed":         {types: typesOf(protocol.Failed{})},
	"cancelled":      {types: typesOf(protocol.Cancelled{})},
	"expired":        {types: typesOf(protocol.Expired{})},
	"refused":        {types: typesOf(protocol.Refused{})},
	"decided":        {types: typesOf(protocol.Decided{})},
	"consumed":       {types: typesOf(protocol.Consumed{})},
	"answered":       {types: typesOf(protocol.Answered{})},
	"assigned":       {types: typesOf(protocol.Assigned{})},
	"voted":          {types: typesOf(protocol.Voted{})},
	"reminded":       {types: typesOf(protocol.Reminded{})},
	"node-event":     {types: typesOf(protocol.NodeEvent{})},
	"audit-record": {
		types: typesOf(protocol.AuditRecord{}),
		parse: parser(protocol.DecodeAuditRecord),
	},
	// The reader's checkpoint is a part of the stored document and
	// ignores the rest by design; the engine's is the whole of it.
	"checkpoint": {
		types: typesOf(protocol.Checkpoint{}, engine.Checkpoint{}), strict: typesOf(engine.Checkpoint{}),
		parse: func(b []byte) error { _, err := protocol.DecodeCheckpoint(b, 1); return err },
	},
	"pending": {types: typesOf(protocol.Pending{})},
	"flow-info": {
		types: typesOf(protocol.FlowInfo{}),
		parse: func(b []byte) error { _, err := protocol.DecodeFlowInfo(b); return err },
	},
	"finished": {
		types: typesOf(protocol.Finished{}),
		parse: func(b []byte) error { _, err := protocol.DecodeFinished(b); return err },
	},
	// A list of keys: each example decodes strictly as a list.
	"audit-keys": {
		types: typesOf(protocol.AuditKey{}), strict: typesOf([]protocol.AuditKey{}),
		parse: parser(protocol.DecodeAuditKeys),
	},
}

// schemaDoc reads a schema file as plain JSON.
func schemaDoc(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := fs.ReadFile(docs.FS(), "schema/"+file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc
}

func TestIndexListsEverySchemaOnce(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(docs.FS(), "schema/*.json")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range docs.Index() {
		if listed[e.File] {
			t.Errorf("index lists %s twice", e.File)
		}
		listed[e.File] = true
		if e.Name+".json" != e.File {
			t.Errorf("index entry %q names file %s; call it %s.json", e.Name, e.File, e.Name)
		}
		switch e.Direction {
		case docs.Inbound, docs.Outbound:
			if e.Type == "" || len(e.Subjects) == 0 {
				t.Errorf("%s: an event's entry needs its type and subjects", e.Name)
			}
		case docs.Stored:
			if (e.Bucket == "" || e.Key == "") == (e.Stream == "" || len(e.Subjects) == 0) {
				t.Errorf("%s: a stored document's entry needs its bucket and key, or its stream and subjects", e.Name)
			}
		case docs.Shared:
		default:
			t.Errorf("%s: direction %q", e.Name, e.Direction)
		}
		doc := schemaDoc(t, e.File)
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema is %v, want draft 2020-12", e.File, doc["$schema"])
		}
		if doc["$id"] != docs.Base()+e.File {
			t.Errorf("%s: $id is %v, want %s", e.File, doc["$id"], docs.Base()+e.File)
		}
		if s, _ := doc["description"].(string); len(s) < 40 {
			t.Errorf("%s: say what it is for in a description", e.File)
		}
		var gotGo []string
		for _, typ := range bindings[e.Name].types {
			gotGo = append(gotGo, typ.String())
		}
		if !slices.Equal(gotGo, e.Go) {
			t.Errorf("%s: index names Go types %q; the tests check %q", e.Name, e.Go, gotGo)
		}
		if _, ok := bindings[e.Name]; !ok && e.Direction != docs.Shared {
			t.Errorf("%s: add it to the bindings of this test", e.Name)
		}
	}
	for _, f := range files {
		if base := filepath.Base(f); base != "index.json" && !listed[base] {
			t.Errorf("%s is not in schema/index.json", f)
		}
	}
	for name := range bindings {
		if _, err := docs.Schema(name); err != nil {
			t.Errorf("bindings name %s: %v", name, err)
		}
	}
}

// TestGoldenEventsMatchTheirSchemas validates every golden event of
// package events, envelope and data, against the schemas.
func TestGoldenEventsMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	set := schematest.Load(t)
	files, err := filepath.Glob(filepath.Join("..", "events", "testdata", "golden", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d golden events (%v)", len(files), err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := set.Validate("cloudevent", body); err != nil {
			t.Errorf("%s: envelope: %v", filepath.Base(f), err)
		}
		ev, err := events.Decode(nil, body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name, _ := set.NameOf(ev.Type())
		seen[name] = true
		if err := set.ValidateEvent(ev.Type(), ev.Data()); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
	for _, e := range docs.Index() {
		if e.Direction == docs.Outbound && !seen[e.Name] {
			t.Errorf("no golden event in events/testdata/golden has the data of %s", e.Name)
		}
	}
}

// TestSchemaExamplesPassTheStrictDecoders checks every example of every
// schema: it is valid against its schema, Interlock's own decoder reads
// it, and it decodes into the Go types with unknown fields refused.
func TestSchemaExamplesPassTheStrictDecoders(t *testing.T) {
	t.Parallel()
	set := schematest.Load(t)
	for _, e := range docs.Index() {
		doc := schemaDoc(t, e.File)
		checkNoNestedExamples(t, e.File, "", doc)
		examples, _ := doc["examples"].([]any)
		if len(examples) == 0 && e.Name != "defs" {
			t.Errorf("%s has no examples", e.File)
		}
		b := bindings[e.Name]
		for i, ex := range examples {
			data, err := json.Marshal(ex)
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("%s example %d", e.File, i)
			if err := set.Validate(e.Name, data); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			if e.Name == "cloudevent" {
				if _, err := events.Decode(nil, data); err != nil {
					t.Errorf("%s: events.Decode: %v", where, err)
				}
				continue
			}
			if b.parse != nil {
				if err := b.parse(data); err != nil {
					t.Errorf("%s: Interlock's decoder refuses it: %v", where, err)
				}
			}
			strict := b.strict
			if strict == nil {
				strict = b.types
			}
			for _, typ := range strict {
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.DisallowUnknownFields()
				if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
					t.Errorf("%s: does not decode strictly into %s: %v", where, typ, err)
				}
			}
		}
	}
}

// checkNoNestedExamples keeps examples at the top of each schema, where
// the test above checks them against the decoders.
func checkNoNestedExamples(t *testing.T, file, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == "examples" && path != "" {
				t.Errorf("%s: examples at %s: put whole examples at the top, where they are checked", file, path)
			}
			if k != "examples" {
				checkNoNestedExamples(t, file, path+"/"+k, child)
			}
		}
	case []any:
		for i, child := range v {
			checkNoNestedExamples(t, file, fmt.Sprintf("%s/%d", path, i), child)
		}
	}
}

// TestSchemasRefuseWhatTheDecodersRefuse: bad command data is refused by
// the schema and by Interlock's decoder alike.
func TestSchemasRefuseWhatTheDecodersRefuse(t *testing.T) {
	t.Parallel()
	set := schematest.Load(t)
	cases := []struct{ schema, data string }{
		{"start", `{"stat": {}}`},
		{"start", `{"state": []}`},
		{"start", `{"origin": "slack"}`},
		{"resume", `{"resumeToken": "t", "anwsers": {"email": "a@b.c"}}`},
		{"resume", `{"resumeToken": "t", "decision": "maybe"}`},
		{"resume", `{"resumeToken": "t", "selected": 3}`},
		{"resume", `{"resumeToken": "t", "selected": ""}`},
		{"resume", `{"resumeToken": "t", "selected": {"choice": {"id": "a"}, "choices": [{"id": "b"}]}}`},
		{"resume", `{"resumeToken": "t", "answers": {"": "x"}}`},
		{"resume", `{"resumeToken": "t", "answers": ["x"]}`},
		{"resume", `{"resumeToken": "t", "expectedCheckpoint": -1}`},
		{"resume", `{"resumeToken": 7}`},
		{"cancel", `{"reason": 1}`},
		{"cancel", `{"why": "dup"}`},
		{"reannounce", `{"requestId": 1}`},
		{"migrate", `{"from": 1, "to": "2"}`},
		{"tool-requested", `{"tool": "issue_refund"}`},
		{"tool-requested", `{"callId": "c-1"}`},
		{"tool-requested", `{"callId": "c-1", "tool": "t", "messages": {}}`},
		{"tool-requested", `{"callId": "c-1", "tool": "t", "context": []}`},
		{"tool-requested", `{"callId": "c-1", "tool": "t", "origin": "x"}`},
		{"tool-requested", `{"callId": "c-1", "tool": "t", "args": [1]}`},
		{"expire", `{"expiresAt": "2026-11-21T10:30:00Z"}`},
		{"expire", `{"requestId": "rq_1", "when": "now"}`},
	}
	for _, tc := range cases {
		if err := set.Validate(tc.schema, []byte(tc.data)); err == nil {
			t.Errorf("%s schema accepts %s", tc.schema, tc.data)
		}
		if err := bindings[tc.schema].parse([]byte(tc.data)); err == nil {
			t.Errorf("Interlock's %s decoder accepts %s", tc.schema, tc.data)
		}
	}
}

// TestSchemasListEveryFieldOfTheGoTypes is the drift check: at every
// level, the properties of a schema are exactly the JSON fields of the Go
// types that read or write its data. A field added to a type and not to
// its schema (or left in a schema after it went from the types) fails it.
// Types with their own MarshalJSON (time.Time, engine.Policy) are leaves.
func TestSchemasListEveryFieldOfTheGoTypes(t *testing.T) {
	t.Parallel()
	r := &resolver{t: t, docs: map[string]map[string]any{}, seen: map[string]bool{}}
	for _, e := range docs.Index() {
		b, ok := bindings[e.Name]
		if !ok {
			continue
		}
		r.compare(e.Name, b.types, e.File, r.doc(e.File))
	}
}

type resolver struct {
	t    *testing.T
	docs map[string]map[string]any
	// seen holds the schema nodes compared with each set of types, so
	// that a recursive type (a policy's then) is compared once.
	seen map[string]bool
}

func (r *resolver) doc(file string) map[string]any {
	if d, ok := r.docs[file]; ok {
		return d
	}
	d := schemaDoc(r.t, file)
	r.docs[file] = d
	return d
}

// resolve follows $ref from node, in file, to the schema that holds the
// properties (or items) it describes.
func (r *resolver) resolve(file string, node map[string]any) (string, map[string]any) {
	for range 16 {
		ref, ok := node["$ref"].(string)
		if !ok {
			return file, node
		}
		target, pointer, _ := strings.Cut(ref, "#")
		if target != "" {
			file = target
		}
		var v any = r.doc(file)
		for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
			if tok == "" {
				continue
			}
			m, _ := v.(map[string]any)
			v = m[tok]
		}
		next, ok := v.(map[string]any)
		if !ok {
			r.t.Fatalf("%s: $ref %s resolves to nothing", file, ref)
		}
		node = next
	}
	r.t.Fatalf("%s: $ref loop", file)
	return "", nil
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// structOf returns the struct type a field's values are (through pointers,
// slices and arrays), or nil for a leaf.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		if t.Implements(marshaler) {
			return nil
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return nil
	}
	return t
}

// jsonFields returns the JSON names of a struct's fields and their types,
// as encoding/json sees them (embedded structs promoted, "-" left out).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func (r *resolver) compare(path string, types []reflect.Type, file string, node map[string]any) {
	r.t.Helper()
	file, node = r.resolve(file, node)
	if node["type"] == "array" {
		items, _ := node["items"].(map[string]any)
		file, node = r.resolve(file, items)
	}
	key := fmt.Sprintf("%s %p %v", file, node, types)
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	props, ok := node["properties"].(map[string]any)
	if !ok {
		r.t.Errorf("%s: the Go types %v are structs, but the schema (%s) lists no properties", path, types, file)
		return
	}
	fields := map[string][]reflect.Type{} // JSON name -> the field's type in each Go type that has it
	for _, typ := range types {
		for name, ft := range jsonFields(typ) {
			if _, ok := props[name]; !ok {
				r.t.Errorf("%s: %s has field %q, which the schema (%s) does not list", path, typ, name, file)
			}
			fields[name] = append(fields[name], ft)
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fts, ok := fields[name]
		if !ok {
			r.t.Errorf("%s: the schema (%s) lists %q, which none of %v has", path, file, name, types)
			continue
		}
		var nested []reflect.Type
		for _, ft := range fts {
			if st := structOf(ft); st != nil {
				nested = append(nested, st)
			}
		}
		if len(nested) > 0 {
			child, _ := props[name].(map[string]any)
			r.compare(path+"."+name, nested, file, child)
		}
	}
}

// TestEnumsMatchTheCode: the closed lists of the schemas are the code's.
func TestEnumsMatchTheCode(t *testing.T) {
	t.Parallel()
	r := &resolver{t: t, docs: map[string]map[string]any{}, seen: map[string]bool{}}
	enum := func(file, pointer string) []string {
		_, node := r.resolve(file, map[string]any{"$ref": file + "#" + pointer})
		var out []string
		for _, v := range node["enum"].([]any) {
			out = append(out, v.(string))
		}
		sort.Strings(out)
		return out
	}
	sorted := func(vs ...string) []string { sort.Strings(vs); return vs }
	cases := []struct {
		what string
		got  []string
		want []string
	}{
		{"refusal codes", enum("defs.json", "/$defs/refusalCode"), sorted(codeStrings(protocol.Codes())...)},
		{"interrupt kinds", enum("defs.json", "/$defs/kind"), sorted(protocol.KindQuestion, protocol.KindChoice, protocol.KindApproval)},
		{"verdicts", enum("defs.json", "/$defs/verdict"), sorted(string(engine.VerdictApprove), string(engine.VerdictEdit), string(engine.VerdictReject), string(engine.VerdictRespond))},
		{"statuses", enum("defs.json", "/$defs/status"), sorted(statusStrings(protocol.Statuses())...)},
		{"audit actions", enum("audit-record.json", "/properties/action"), sorted(protocol.AuditActions()...)},
		{"gate decisions", enum("decided.json", "/properties/decision"), sorted(engine.ToolAllowed, engine.ToolApproved,
			engine.ToolEdited, engine.ToolRejected, engine.ToolResponded, engine.ToolExpired)},
		{"timeout policies", enum("defs.json", "/$defs/policy/properties/action"), sorted(string(engine.OnTimeoutExpire),
			string(engine.OnTimeoutReject), string(engine.OnTimeoutApprove), string(engine.OnTimeoutEscalate))},
	}
	for _, tc := range cases {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: the schemas say %q, the code %q", tc.what, tc.got, tc.want)
		}
	}
}

func codeStrings(cs []protocol.Code) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func statusStrings(ss []protocol.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
