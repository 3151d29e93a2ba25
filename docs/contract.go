package docs

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

//go:embed asyncapi.yaml schema/*.json
var files embed.FS

// ErrUnknownSchema is returned by [Schema] for a name the index does not
// list.
var ErrUnknownSchema = errors.New("docs: no such schema")

// Directions of an [Entry].
const (
	// Inbound: the data of a command a client sends to Interlock.
	Inbound = "inbound"
	// Outbound: the data of an event or audit record Interlock publishes.
	Outbound = "outbound"
	// Stored: a document Interlock keeps in a KV bucket, or a message it
	// keeps in a stream.
	Stored = "stored"
	// Shared: definitions and the envelope, used by the others.
	Shared = "shared"
)

// Entry is one schema of the index (schema/index.json).
type Entry struct {
	// Name is how `interlock schema` and [Schema] call it: "resume".
	Name string `json:"name"`
	// File is its file in the schema folder: "resume.json".
	File string `json:"file"`
	// Direction is Inbound, Outbound, Stored or Shared.
	Direction string `json:"direction"`
	// Type is the CloudEvent type whose data it describes, with {kind} or
	// {action} standing for the last token of node events and audit
	// records.
	Type string `json:"type,omitempty"`
	// Subjects are where such events travel, with {flow}, {run}, {role},
	// {callId}, {requestId} and {kind} standing for tokens.
	Subjects []string `json:"subjects,omitempty"`
	// Bucket and Key say where a stored document is kept in a KV bucket;
	// Stream (with {STATUS} standing for a status in upper case) and
	// Subjects where a stored message is kept in a stream.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	Stream string `json:"stream,omitempty"`
	// Go names the Go types that read or write the data, as package.Type.
	Go []string `json:"go,omitempty"`
}

// index is the document of schema/index.json.
type index struct {
	Description string  `json:"description"`
	Base        string  `json:"base"`
	Schemas     []Entry `json:"schemas"`
}

// FS returns the contract's files: asyncapi.yaml and schema/*.json.
func FS() fs.FS { return files }

// AsyncAPI returns the AsyncAPI 3.0 document, in YAML.
func AsyncAPI() []byte { return mustRead("asyncapi.yaml") }

// IndexJSON returns schema/index.json as it is stored.
func IndexJSON() []byte { return mustRead("schema/index.json") }

// parsed is the index, read once. The file is built in and checked by the
// package's tests, so it cannot fail to parse in a binary that passed them.
var parsed = sync.OnceValue(func() index {
	var ix index
	if err := json.Unmarshal(IndexJSON(), &ix); err != nil {
		panic(fmt.Sprintf("docs: schema/index.json: %v", err))
	}
	return ix
})

// Index returns the schemas the index lists, in its order.
func Index() []Entry { return append([]Entry(nil), parsed().Schemas...) }

// Base returns the URI the schemas' $ids are relative to: each schema's
// $id is Base followed by its file name.
func Base() string { return parsed().Base }

// Schema returns the JSON Schema called name, as listed by [Index] ("resume"),
// or its file name ("resume.json"). For another name it returns an error
// wrapping [ErrUnknownSchema].
func Schema(name string) ([]byte, error) {
	name = strings.TrimSuffix(name, ".json")
	for _, e := range Index() {
		if e.Name == name {
			return mustRead("schema/" + e.File), nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownSchema, name)
}

func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("docs: %s is not built in: %v", name, err))
	}
	return b
}
