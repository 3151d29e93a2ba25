package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/protocol"
)

// End is the pseudo-node a run reaches when it completes. A router returns it
// to end the run; a node with no outgoing edge ends the run too.
const End = "__end__"

// NodeFunc is the code of a node. It reads the state with [Node.State],
// changes it with [Node.Set] and [Node.Update], and pauses with [Node.Ask] or
// [Node.Choose]. A node may run more than once (it re-runs from its top on
// every resume); wrap side effects in [Step].
type NodeFunc[S any] func(ctx context.Context, n *Node[S]) error

// Router picks the node after a node from the state: a node name, or [End].
type Router[S any] func(state S) string

// Builder declares a flow. Errors are collected and returned by Build.
type Builder[S any] struct {
	name     string
	nodes    map[string]NodeFunc[S]
	order    []string
	edges    map[string]string
	branches map[string]branch[S]
	start    string
	reducers map[string]Reducer
	gates    map[string]*Gate
	rejects  map[string]string
	version  string
	// migrations are the flow's migrations, by the version they move
	// runs from ([Builder.Migrate]).
	migrations map[string]Migration
	errs       []error
}

type branch[S any] struct {
	route   Router[S]
	targets []string
}

// NewFlow starts declaring a flow named name over state type S: a struct
// with json tags, or map[string]any for an untyped state.
func NewFlow[S any](name string) *Builder[S] {
	b := &Builder[S]{
		name:     name,
		nodes:    map[string]NodeFunc[S]{},
		edges:    map[string]string{},
		branches: map[string]branch[S]{},
		reducers: map[string]Reducer{},
		gates:    map[string]*Gate{},
		rejects:  map[string]string{},
	}
	if err := CheckName("flow", name); err != nil {
		b.errs = append(b.errs, err)
	}
	return b
}

// Node adds a node.
func (b *Builder[S]) Node(name string, fn NodeFunc[S]) *Builder[S] {
	switch {
	case name == End:
		b.errs = append(b.errs, fmt.Errorf("node name %q is reserved for the end of the flow", End))
	case CheckName("node", name) != nil:
		b.errs = append(b.errs, fmt.Errorf("node %q: %w", name, CheckName("node", name)))
	case fn == nil:
		b.errs = append(b.errs, fmt.Errorf("node %q: function is nil", name))
	case b.nodes[name] != nil:
		b.errs = append(b.errs, fmt.Errorf("node %q is declared twice", name))
	default:
		b.nodes[name] = fn
		b.order = append(b.order, name)
	}
	return b
}

// Edge makes to follow from. to may be [End].
func (b *Builder[S]) Edge(from, to string) *Builder[S] {
	if _, dup := b.edges[from]; dup {
		b.errs = append(b.errs, fmt.Errorf("node %q has two outgoing edges; use Branch to choose between nodes", from))
	}
	b.edges[from] = to
	return b
}

// Branch adds a conditional edge: after from, route picks the next node among
// targets (node names or [End]), which Build checks exist.
func (b *Builder[S]) Branch(from string, route Router[S], targets ...string) *Builder[S] {
	switch {
	case route == nil:
		b.errs = append(b.errs, fmt.Errorf("branch from %q: router is nil", from))
	case len(targets) == 0:
		b.errs = append(b.errs, fmt.Errorf("branch from %q: list the nodes the router may return", from))
	default:
		if _, dup := b.branches[from]; dup {
			b.errs = append(b.errs, fmt.Errorf("node %q has two branches", from))
		}
		b.branches[from] = branch[S]{route: route, targets: targets}
	}
	return b
}

// Version declares the flow's version (1 to 32 of A-Z a-z 0-9 . _ -, such
// as "2" or "2026-11-29"), which every checkpoint of its runs records.
// Without one, the version is derived from the flow's structure (see
// [Flow.Version]).
func (b *Builder[S]) Version(v string) *Builder[S] {
	if err := CheckVersion(v); err != nil {
		b.errs = append(b.errs, err)
	}
	b.version = v
	return b
}

// CheckVersion reports whether v is a valid declared flow version: 1 to
// 32 of A-Z a-z 0-9 . _ -.
func CheckVersion(v string) error {
	if v == "" || len(v) > 32 {
		return fmt.Errorf("flow version %q: use 1 to 32 of A-Z a-z 0-9 . _ -", v)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-", c) >= 0 {
			continue
		}
		return fmt.Errorf("flow version %q has %q at byte %d: use only A-Z a-z 0-9 . _ -", v, c, i)
	}
	return nil
}

// Start names the node a run starts at.
func (b *Builder[S]) Start(node string) *Builder[S] {
	b.start = node
	return b
}

// Reducer declares how updates to a top-level state field combine with its
// value. Fields without one are replaced.
func (b *Builder[S]) Reducer(field string, r Reducer) *Builder[S] {
	if r < Replace || r > Merge {
		b.errs = append(b.errs, fmt.Errorf("reducer for %q: unknown reducer %d", field, int(r)))
	}
	if p, c, err := splitPath(field); err != nil || c != "" {
		b.errs = append(b.errs, fmt.Errorf("reducer for %q: reducers apply to top-level fields", field))
	} else {
		b.reducers[p] = r
	}
	return b
}

// Build checks the flow and returns it. The error names every unknown node,
// a missing start, and every node no path from the start reaches.
func (b *Builder[S]) Build() (*Flow, error) {
	errs := slices.Clone(b.errs)
	known := func(n string) bool { return n == End || b.nodes[n] != nil }
	if len(b.nodes) == 0 {
		errs = append(errs, errors.New("no nodes: add one with Node"))
	}
	if b.start == "" {
		errs = append(errs, errors.New("no start node: name one with Start"))
	} else if b.nodes[b.start] == nil {
		errs = append(errs, fmt.Errorf("start node %q is not a node", b.start))
	}
	for _, from := range sortedKeys(b.edges) {
		to := b.edges[from]
		if b.nodes[from] == nil {
			errs = append(errs, fmt.Errorf("edge %s -> %s: %q is not a node", from, to, from))
		}
		if !known(to) {
			errs = append(errs, fmt.Errorf("edge %s -> %s: %q is not a node", from, to, to))
		}
		if _, ok := b.branches[from]; ok {
			errs = append(errs, fmt.Errorf("node %q has both an edge and a branch; use one", from))
		}
	}
	for _, from := range sortedKeys(b.branches) {
		if b.nodes[from] == nil {
			errs = append(errs, fmt.Errorf("branch from %q: %q is not a node", from, from))
		}
		for _, to := range b.branches[from].targets {
			if !known(to) {
				errs = append(errs, fmt.Errorf("branch %s -> %s: %q is not a node", from, to, to))
			}
		}
	}
	for _, key := range sortedKeys(b.gates) {
		at, node, _ := strings.Cut(key, " ")
		if b.nodes[node] == nil {
			errs = append(errs, fmt.Errorf("gate %s %q: %q is not a node", at, node, node))
		}
	}
	for _, from := range sortedKeys(b.rejects) {
		to := b.rejects[from]
		if b.nodes[from] == nil {
			errs = append(errs, fmt.Errorf("reject route %s -> %s: %q is not a node", from, to, from))
		}
		if !known(to) {
			errs = append(errs, fmt.Errorf("reject route %s -> %s: %q is not a node", from, to, to))
		}
	}
	if b.nodes[b.start] != nil {
		reached := map[string]bool{}
		var walk func(string)
		walk = func(n string) {
			if reached[n] || b.nodes[n] == nil {
				return
			}
			reached[n] = true
			if to, ok := b.edges[n]; ok {
				walk(to)
			}
			for _, to := range b.branches[n].targets {
				walk(to)
			}
			if to, ok := b.rejects[n]; ok {
				walk(to)
			}
		}
		walk(b.start)
		for _, n := range b.order {
			if !reached[n] {
				errs = append(errs, fmt.Errorf("node %q is unreachable from start node %q", n, b.start))
			}
		}
	}
	errs = append(errs, b.checkMigrations()...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("engine: flow %q: %w", b.name, errors.Join(errs...))
	}

	f := &Flow{
		name:     b.name,
		version:  b.version,
		start:    b.start,
		nodes:    map[string]func(context.Context, *exec) error{},
		next:     map[string]func(*exec) (string, error){},
		reducers: b.reducers,
		gates:    b.gates,
		rejects:  b.rejects,
	}
	if !isMap[S]() {
		f.fit = func(d Doc) error { _, err := decodeState[S](d); return err }
		f.typeOf = func(path string) string { return fieldType(reflect.TypeFor[S](), path) }
		f.types = stateTypes(reflect.TypeFor[S]())
	}
	if f.version == "" {
		f.version = b.structure(f.types)
	}
	if _, own := b.migrations[f.version]; own {
		return nil, fmt.Errorf("engine: flow %q: a migration from version %q, which is the flow's own", b.name, f.version)
	}
	f.migrations = maps.Clone(b.migrations)
	for name, fn := range b.nodes {
		f.nodes[name] = func(ctx context.Context, x *exec) error { return fn(ctx, &Node[S]{x: x}) }
	}
	for from, to := range b.edges {
		f.next[from] = func(*exec) (string, error) { return to, nil }
	}
	for from, br := range b.branches {
		f.next[from] = func(x *exec) (string, error) {
			s, err := decodeState[S](x.cp.State)
			if err != nil {
				return "", err
			}
			to := br.route(s)
			if !slices.Contains(br.targets, to) {
				return "", fmt.Errorf("router after %q returned %q, which is not among its targets %v", from, to, br.targets)
			}
			return to, nil
		}
	}
	return f, nil
}

// structure is the version of a flow that declares none: "s-" and the
// first 12 hex digits of the SHA-256 of its structure, written one line
// per part in a fixed order: its start, its nodes, edges, branches (with
// their targets), gates and reject routes, and the JSON types of its
// state's fields. A node renamed, added or removed, an edge moved, or a
// state field renamed or retyped makes another version; a change inside
// a node's code does not (declare a version for that).
func (b *Builder[S]) structure(types map[string]string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "start %s\n", b.start)
	for _, n := range slices.Sorted(maps.Keys(b.nodes)) {
		fmt.Fprintf(&sb, "node %s\n", n)
	}
	for _, from := range sortedKeys(b.edges) {
		fmt.Fprintf(&sb, "edge %s %s\n", from, b.edges[from])
	}
	for _, from := range sortedKeys(b.branches) {
		fmt.Fprintf(&sb, "branch %s %s\n", from, strings.Join(b.branches[from].targets, " "))
	}
	for _, key := range sortedKeys(b.gates) {
		fmt.Fprintf(&sb, "gate %s\n", key)
	}
	for _, from := range sortedKeys(b.rejects) {
		fmt.Fprintf(&sb, "reject %s %s\n", from, b.rejects[from])
	}
	for _, field := range slices.Sorted(maps.Keys(types)) {
		fmt.Fprintf(&sb, "state %s %s\n", field, types[field])
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return "s-" + hex.EncodeToString(sum[:6])
}

// MustBuild is Build for flows declared at program start: it panics on error.
func (b *Builder[S]) MustBuild() *Flow {
	f, err := b.Build()
	if err != nil {
		panic(err)
	}
	return f
}

// Flow is a built flow, ready to run.
type Flow struct {
	name     string
	version  string
	start    string
	nodes    map[string]func(context.Context, *exec) error
	next     map[string]func(*exec) (string, error)
	reducers map[string]Reducer
	gates    map[string]*Gate
	rejects  map[string]string
	// fit checks that a state decodes into the flow's typed state.
	fit func(Doc) error
	// typeOf returns the JSON type of a state field, "" if unknown.
	typeOf func(path string) string
	// types are the JSON types of the state's fields, where S tells.
	types map[string]string
	// expired, if set, adds the flow's own events to a run that expired.
	expired func(t *txn, in *Interrupt)
	// cancelled, if set, adds to the transition of a run cancelled while
	// waiting (the ask flow's answered event).
	cancelled func(t *txn)
	// migrations move runs of other versions to this one.
	migrations map[string]Migration
}

// Name returns the flow's name.
func (f *Flow) Name() string { return f.name }

// HasNode reports whether the flow has a node called name.
func (f *Flow) HasNode(name string) bool {
	_, ok := f.nodes[name]
	return ok
}

// Version returns the flow's version: the one declared with
// [Builder.Version], else one derived from its structure ("s-" and 12 hex
// digits; see [Builder.Version]). Every checkpoint a worker writes records
// the version of the flow that wrote it, as does the run's entry of the
// pending index.
func (f *Flow) Version() string { return f.version }

// Info returns what a surface may know of the flow: the JSON types of its
// state's fields (field, and parent.child one level down), where the
// flow's state type tells. The workers publish it (see
// [protocol.FlowKey]).
func (f *Flow) Info() protocol.FlowInfo {
	return protocol.FlowInfo{Flow: f.name, Version: f.version, State: maps.Clone(f.types)}
}

// after returns the node that follows the current node.
func (f *Flow) after(x *exec) (string, error) {
	next, ok := f.next[x.cp.Node]
	if !ok {
		return End, nil
	}
	return next(x)
}

func isMap[S any]() bool {
	t := reflect.TypeFor[S]()
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String
}

func decodeState[S any](d Doc) (S, error) {
	var s S
	b, err := json.Marshal(d)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return s, fmt.Errorf("state.%s: JSON %s does not fit %s", te.Field, te.Value, te.Type)
		}
		return s, fmt.Errorf("state does not fit %T: %w", s, err)
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
