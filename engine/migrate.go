package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// AnyVersion, as the version of [Builder.Migrate], takes runs of every
// other version of the flow as they are. Interlock's own flows (the gate,
// asks, absences) declare it: their compatibility across releases is
// Interlock's to keep, and its upgrade tests keep it.
const AnyVersion = "*"

// Migration says how a run of an earlier version of a flow moves to the
// flow's version: a worker of the flow takes the commands of such runs
// (it would otherwise leave them to a worker of their own version), and
// before it applies the first, moves the run in one audited transition
// (audit action "migrated") that keeps the run's pending interrupt, its
// request id, its token's rules and its deadline.
type Migration struct {
	// Nodes maps a node of the earlier version to the node of this one a
	// run waiting or stopped there moves to: a node renamed, or a node
	// removed and the one that takes its place. A node not named here
	// keeps its name, and must exist in this version.
	Nodes map[string]string
	// State, if set, changes a migrated run's state (a field renamed, a
	// field added with a default). It is given the state as it is and
	// returns the state of this version, which must fit the flow's state
	// type.
	State func(Doc) (Doc, error)
}

// Migrate declares how runs of version from (a version the flow had
// before, or [AnyVersion]) move to this one. A flow without a migration
// for a version leaves its runs to workers of that version: they stay
// queued while none runs (docs/operations.md, Deploying a new version of
// a flow).
func (b *Builder[S]) Migrate(from string, m Migration) *Builder[S] {
	if from != AnyVersion {
		if err := CheckVersion(from); err != nil {
			b.errs = append(b.errs, fmt.Errorf("migration: %w", err))
			return b
		}
	}
	if b.migrations == nil {
		b.migrations = map[string]Migration{}
	}
	if _, dup := b.migrations[from]; dup {
		b.errs = append(b.errs, fmt.Errorf("two migrations from version %q", from))
	}
	b.migrations[from] = m
	return b
}

// checkMigrations checks that every migration moves runs to nodes the
// flow has.
func (b *Builder[S]) checkMigrations() []error {
	var errs []error
	for _, from := range slices.Sorted(maps.Keys(b.migrations)) {
		m := b.migrations[from]
		for _, old := range slices.Sorted(maps.Keys(m.Nodes)) {
			if _, ok := b.nodes[m.Nodes[old]]; !ok {
				errs = append(errs, fmt.Errorf("migration from version %q moves node %q to %q, which the flow does not have", from, old, m.Nodes[old]))
			}
		}
	}
	return errs
}

// Takes reports whether a worker of f applies the commands of a run of
// version v: its own version, a version f migrates from, any version for
// a flow that takes every one, and a run of no recorded version (written
// before flows had versions).
func (f *Flow) Takes(v string) bool {
	if v == "" || v == f.version {
		return true
	}
	_, ok := f.migration(v)
	return ok
}

// Migrates are the versions f declares migrations from ([AnyVersion]
// included), sorted.
func (f *Flow) Migrates() []string { return slices.Sorted(maps.Keys(f.migrations)) }

// migration is f's migration of runs of version v.
func (f *Flow) migration(v string) (Migration, bool) {
	if m, ok := f.migrations[v]; ok {
		return m, true
	}
	m, ok := f.migrations[AnyVersion]
	return m, ok
}

// MigratedNode is the node of f a run of version v at node moves to, and
// whether f has it: what a worker checks at its start for the runs that
// wait.
func (f *Flow) MigratedNode(v, node string) (string, bool) {
	if v != "" && v != f.version {
		if m, ok := f.migration(v); ok {
			if to, ok := m.Nodes[node]; ok {
				node = to
			}
		}
	}
	return node, f.HasNode(node)
}

// migrate moves the transaction's run, of another version, to f's in a
// transition of its own: it renames the run's node, changes its state,
// and records the move (audit action "migrated", by the worker); the
// pending interrupt stays as it was, its request id and deadline
// included. An error says why the run cannot move: a node this version
// does not have, a state that does not fit.
func (r *Runner) migrate(ctx context.Context, t *txn) error {
	cp, f := t.cp, t.f
	from := cp.FlowVersion
	m, _ := f.migration(from)
	node := cp.Node
	if to, ok := m.Nodes[node]; ok && node != "" {
		node = to
	}
	if node != "" && !f.HasNode(node) {
		return fmt.Errorf("run %s of flow %s is at node %q of version %s, which version %s does not have: declare where it moves (engine.Migration.Nodes)", cp.Run, cp.Flow, cp.Node, from, f.version)
	}
	state := cp.State
	if m.State != nil {
		next, err := m.State(state.clone())
		if err != nil {
			return fmt.Errorf("migrating the state of run %s of flow %s from version %s: %w", cp.Run, cp.Flow, from, err)
		}
		state = next
	}
	if f.fit != nil {
		if err := f.fit(state); err != nil {
			return fmt.Errorf("the state of run %s of flow %s, migrated from version %s, does not fit version %s: %w", cp.Run, cp.Flow, from, f.version, err)
		}
	}
	old := cp.Node
	cp.Node, cp.State = node, state
	if cp.Interrupt != nil && cp.Interrupt.Node == old {
		cp.Interrupt.Node = node
	}
	if cp.GatePassed == old && old != "" {
		cp.GatePassed = node
	}
	t.caller = authority.Caller{Name: r.cfg.Source, Method: protocol.AuthServer}
	t.actor = r.cfg.Source
	rec := &protocol.AuditRecord{Action: protocol.ActionMigrated, Node: node, By: r.cfg.Source, Source: r.cfg.Source,
		Migration: &protocol.AuditMigration{From: from, To: f.version, Node: old}}
	rec.Outcome = &protocol.AuditOutcome{Status: cp.Status, Node: node}
	if in := cp.Interrupt; in != nil {
		rec.RequestID, rec.Kind = in.RequestID, in.Kind
		rec.Outcome.RequestID, rec.Outcome.Kind = in.RequestID, in.Kind
	}
	t.begin("", protocol.ActionMigrated)
	t.audit(rec)
	_, err := r.commit(ctx, t)
	return err
}
