package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

// jsonNames are the JSON names of t's fields, and of the fields of the
// structs it embeds, as encoding/json writes them (those tagged "-" left
// out).
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "":
			out = append(out, jsonNames(f.Type)...)
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// The engine keeps its own types of what the protocol package types for
// readers: the stored checkpoint (with what only a worker needs: the
// outbox, recorded steps, ids) and a flow author's question (with its
// validator). Each must hold every field the protocol's type names, so
// that what readers read is what the engine writes.
func TestTheEnginesStoredTypesHoldEveryFieldOfTheProtocols(t *testing.T) {
	for _, pair := range []struct {
		engine, protocol any
		same             bool
	}{
		{Checkpoint{}, protocol.Checkpoint{}, false},
		{Interrupt{}, protocol.CheckpointInterrupt{}, false},
		{Cause{}, protocol.CheckpointCause{}, false},
		{Question{}, protocol.Question{}, true},
	} {
		e, p := reflect.TypeOf(pair.engine), reflect.TypeOf(pair.protocol)
		ef, pf := jsonNames(e), jsonNames(p)
		for _, name := range pf {
			// A reader fills the checkpoint number from the KV entry's
			// revision; the document does not hold it.
			if p == reflect.TypeFor[protocol.Checkpoint]() && name == "checkpoint" {
				continue
			}
			if !slices.Contains(ef, name) {
				t.Errorf("%s has no field %q, which %s names", e, name, p)
			}
		}
		if pair.same && !slices.Equal(ef, pf) {
			t.Errorf("%s has the JSON fields %v, %s %v: they must be the same", e, ef, p, pf)
		}
	}
}

// A question as the wire has it is the flow author's, field for field.
func TestAWireQuestionIsTheAuthorsQuestion(t *testing.T) {
	q := Question{Field: "email", Question: "Your e-mail?", Type: "string", Suggestions: []string{"a@example.com"},
		Context: "be brief", Schema: json.RawMessage(`{"format":"email"}`), Validate: func(context.Context, any) (Update, error) { return nil, nil }}
	want, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(wireQuestions([]Question{q})[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("wire question %s, want %s", got, want)
	}
}
