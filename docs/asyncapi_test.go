package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/docs"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/schematest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// asyncAPISchema is the JSON Schema of AsyncAPI 3.0.0, as published by the
// AsyncAPI Initiative (github.com/asyncapi/spec-json-schemas,
// schemas/3.0.0.json), kept here so that the test needs no network.
const asyncAPISchema = "testdata/asyncapi-3.0.0.json"

// schemaFormat is the AsyncAPI schema format of Interlock's JSON Schemas.
const schemaFormat = "application/schema+json;version=draft-2020-12"

// asyncAPI returns the AsyncAPI document as JSON, and decoded.
func asyncAPI(t *testing.T) ([]byte, map[string]any) {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(docs.AsyncAPI(), &doc); err != nil {
		t.Fatalf("asyncapi.yaml: %v", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("asyncapi.yaml does not convert to JSON: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return b, m
}

// at returns the value at a JSON pointer of doc.
func at(doc any, pointer string) any {
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[tok]
	}
	return doc
}

func TestAsyncAPIDocumentIsValidAsyncAPI3(t *testing.T) {
	t.Parallel()
	raw, doc := asyncAPI(t)
	b, err := os.ReadFile(asyncAPISchema)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := schematest.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const id = "http://asyncapi.com/definitions/3.0.0/asyncapi.json"
	if err := c.AddResource(id, meta); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("compiling the AsyncAPI 3.0.0 schema: %v", err)
	}
	v, err := schematest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("asyncapi.yaml is not a valid AsyncAPI 3.0.0 document: %v", err)
	}
	// The AsyncAPI schema does not follow references: every local one
	// must name something.
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				switch {
				case strings.HasPrefix(ref, "#/"):
					if at(doc, ref[1:]) == nil {
						t.Errorf("%s: $ref %s names nothing", path, ref)
					}
				case strings.HasPrefix(ref, "schema/"):
					if _, err := docs.Schema(strings.TrimPrefix(ref, "schema/")); err != nil {
						t.Errorf("%s: $ref %s: %v", path, ref, err)
					}
				default:
					t.Errorf("%s: $ref %s is neither local nor a file of schema/", path, ref)
				}
			}
			for k, child := range v {
				walk(path+"/"+k, child)
			}
		case []any:
			for _, child := range v {
				walk(path+"[]", child)
			}
		}
	}
	walk("", doc)
}

// messages compiles the payload and headers of every message of the
// document's components.
type message struct {
	name     string
	payload  *jsonschema.Schema
	headers  *jsonschema.Schema
	examples []any
}

func compileMessages(t *testing.T) []message {
	t.Helper()
	raw, doc := asyncAPI(t)
	c, err := schematest.Compiler()
	if err != nil {
		t.Fatal(err)
	}
	// The document sits beside the schema folder, so its references
	// (schema/start.json) resolve to the schemas' $ids.
	loc := strings.TrimSuffix(docs.Base(), "schema/") + "asyncapi.yaml"
	v, err := schematest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(loc, v); err != nil {
		t.Fatal(err)
	}
	msgs, _ := at(doc, "/components/messages").(map[string]any)
	names := make([]string, 0, len(msgs))
	for name := range msgs {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []message
	for _, name := range names {
		m := message{name: name}
		ptr := "/components/messages/" + name
		payload, _ := at(doc, ptr+"/payload").(map[string]any)
		if f, ok := payload["schemaFormat"]; ok {
			if f != schemaFormat {
				t.Errorf("%s: payload schemaFormat %v, want %s", name, f, schemaFormat)
			}
			ptr += "/payload/schema"
		} else {
			ptr += "/payload"
		}
		if m.payload, err = c.Compile(loc + "#" + ptr); err != nil {
			t.Fatalf("%s: payload: %v", name, err)
		}
		if m.headers, err = c.Compile(loc + "#/components/messages/" + name + "/headers"); err != nil {
			t.Fatalf("%s: headers: %v", name, err)
		}
		m.examples, _ = at(doc, "/components/messages/"+name+"/examples").([]any)
		out = append(out, m)
	}
	return out
}

func validate(sch *jsonschema.Schema, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := schematest.Decode(b)
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// TestAsyncAPIMessagesMatchWhatInterlockSends compiles every message's
// payload (the JSON Schemas under the CloudEvents envelope) and headers,
// checks the examples against them, and checks that every golden event
// of package events is the payload of exactly one message but the dead
// letter.
func TestAsyncAPIMessagesMatchWhatInterlockSends(t *testing.T) {
	t.Parallel()
	msgs := compileMessages(t)
	examples := 0
	for _, m := range msgs {
		for i, ex := range m.examples {
			examples++
			ex, _ := ex.(map[string]any)
			if err := validate(m.payload, ex["payload"]); err != nil {
				t.Errorf("%s example %d: payload: %v", m.name, i, err)
			}
			if err := validate(m.headers, ex["headers"]); err != nil {
				t.Errorf("%s example %d: headers: %v", m.name, i, err)
			}
			// A structured example is an event Interlock reads; a binary
			// one's payload is data its decoder reads.
			payload, _ := json.Marshal(ex["payload"])
			if strings.HasSuffix(m.name, "Binary") {
				verb := strings.TrimSuffix(m.name, "Binary")
				if b, ok := bindings[verb]; ok {
					if err := b.parse(payload); err != nil {
						t.Errorf("%s example %d: Interlock's decoder refuses it: %v", m.name, i, err)
					}
				}
			} else if _, err := events.Decode(nil, payload); err != nil {
				t.Errorf("%s example %d: events.Decode: %v", m.name, i, err)
			}
		}
	}
	if examples < 3 {
		t.Errorf("only %d message examples", examples)
	}
	files, err := filepath.Glob(filepath.Join("..", "events", "testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden events: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		var matched []string
		for _, m := range msgs {
			// A dead letter is a copy of anything.
			if m.name != "deadLetter" && validate(m.payload, ev) == nil {
				matched = append(matched, m.name)
			}
		}
		if len(matched) != 1 {
			t.Errorf("%s is the payload of %d messages %q, want exactly one", filepath.Base(f), len(matched), matched)
		}
	}
}

// TestAsyncAPIChannelsAreTheProtocolsSubjects checks the channels against
// the names package wire gives the code, the operations' directions, and
// that every event type and schema has its place.
func TestAsyncAPIChannelsAreTheProtocolsSubjects(t *testing.T) {
	t.Parallel()
	raw, doc := asyncAPI(t)
	n, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"start":        n.In("{flow}", "start"),
		"resume":       n.In("{flow}", "resume"),
		"resumeAsRole": n.ResumeAs("{flow}", "{role}"),
		"cancel":       n.In("{flow}", "cancel"),
		"reannounce":   n.In("{flow}", "reannounce"),
		"migrate":      n.In("{flow}", "migrate"),
		"toolRequest":  n.GateRequest(),
		"toolConsume":  n.GateConsume(),
		"expire":       n.Due("{flow}", "expire"),
		"schedule":     n.Schedule("{flow}", "{run}", "{requestId}"),
		"assign":       n.In("{flow}", "assign"),
		"remind":       n.Due("{flow}", "remind"),
		"reminder":     n.Schedule("{flow}", "{run}", "{requestId}") + ".r{n}",
		"decided":      n.Event("gate", "{callId}", protocol.EventDecided),
		"askRequest":   n.AskRequest(),
		"answered":     n.Event("ask", "{askId}", protocol.EventAnswered),
		"consumed":     n.Event("gate", "{callId}", protocol.EventConsumed),
		"nodeEvent":    n.Event("{flow}", "{run}", "{kind}"),
		"audit":        n.Audit("{flow}", "{run}"),
		"deadLetter":   n.DeadLetter("{reason}"),
	}
	for _, kind := range protocol.Events() {
		if kind != protocol.EventDecided && kind != protocol.EventAnswered && kind != protocol.EventConsumed {
			want[kind] = n.Event("{flow}", "{run}", kind)
		}
	}
	channels, _ := doc["channels"].(map[string]any)
	for name, addr := range want {
		if got := at(channels, "/"+name+"/address"); got != addr {
			t.Errorf("channel %s has address %v, want %s", name, got, addr)
		}
	}
	for name := range channels {
		if _, ok := want[name]; !ok {
			t.Errorf("channel %s is not a subject the code knows; add it to this test", name)
		}
	}
	for _, verb := range []string{"start", "resume", "cancel", "reannounce", "request", "expire", "assign", "remind", "consume", "migrate"} {
		typ, ok := protocol.InboundType(verb)
		if !ok || !strings.Contains(string(raw), `"const":"`+typ+`"`) {
			t.Errorf("no message has CloudEvent type %s (%s)", typ, verb)
		}
	}
	if !strings.Contains(string(raw), `"const":"`+protocol.TypeAskRequest+`"`) {
		t.Errorf("no message has CloudEvent type %s (ask)", protocol.TypeAskRequest)
	}
	for _, kind := range protocol.Events() {
		typ, _ := protocol.OutboundType(kind)
		if !strings.Contains(string(raw), `"const":"`+typ+`"`) {
			t.Errorf("no message has CloudEvent type %s", typ)
		}
	}
	for _, e := range docs.Index() {
		if e.Direction != docs.Shared && !strings.Contains(string(raw), `"$ref":"schema/`+e.File+`"`) {
			t.Errorf("asyncapi.yaml does not reference schema/%s", e.File)
		}
	}
	// Clients send on inbound subjects and receive the rest; nobody sends
	// deadlines but the server.
	ops, _ := doc["operations"].(map[string]any)
	used := map[string]bool{}
	for name, op := range ops {
		ref, _ := at(op, "/channel/$ref").(string)
		ch := strings.TrimPrefix(ref, "#/channels/")
		used[ch] = true
		addr, _ := at(channels, "/"+ch+"/address").(string)
		inbound := strings.HasPrefix(addr, n.Prefix+".in.")
		switch action := at(op, "/action"); {
		case inbound && action != "send", !inbound && action != "receive":
			t.Errorf("operation %s %vs on %s", name, action, addr)
		}
		msgs, _ := at(op, "/messages").([]any)
		if len(msgs) == 0 {
			t.Errorf("operation %s lists no messages", name)
		}
		for _, m := range msgs {
			if r, _ := at(m, "/$ref").(string); !strings.HasPrefix(r, ref+"/messages/") {
				t.Errorf("operation %s: message %s is not of its channel %s", name, r, ref)
			}
		}
	}
	for name := range channels {
		serverOnly := name == "expire" || name == "schedule" || name == "remind" || name == "reminder"
		if !used[name] && !serverOnly {
			t.Errorf("channel %s has no operation", name)
		}
		if used[name] && serverOnly {
			t.Errorf("channel %s has an operation: clients neither send nor receive deadlines and reminders", name)
		}
	}
	// The streams and buckets documented are the ones provisioned.
	var streams, buckets []string
	for _, s := range at(doc, "/x-interlock-jetstream/streams").([]any) {
		streams = append(streams, at(s, "/name").(string))
	}
	for _, b := range at(doc, "/x-interlock-jetstream/buckets").([]any) {
		buckets = append(buckets, at(b, "/name").(string))
	}
	wantStreams := []string{n.ScheduleStream(), n.InStream(), n.EventStream(), n.AuditStream(), n.DeadLetterStream()}
	for _, status := range wire.FinishedStatuses {
		wantStreams = append(wantStreams, n.FinishedStream(status))
	}
	wantBuckets := []string{n.RunsBucket(), n.PendingBucket(), n.ConfigBucket(), n.KeysBucket()}
	if !slices.Equal(streams, wantStreams) || !slices.Equal(buckets, wantBuckets) {
		t.Errorf("x-interlock-jetstream lists streams %q and buckets %q, want %q and %q", streams, buckets, wantStreams, wantBuckets)
	}
	for name := range channels {
		stream, _ := at(channels, "/"+name+"/x-interlock-stream").(string)
		if !slices.Contains(wantStreams, stream) {
			t.Errorf("channel %s: x-interlock-stream %q", name, stream)
		}
	}
}
