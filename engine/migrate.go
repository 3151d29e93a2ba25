package engine

import (
	"cmp"
	"context"
	"errors"
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
const AnyVersion = protocol.AnyVersion

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
	return r.migrateAs(ctx, t, authority.Caller{Name: r.cfg.Source, Method: protocol.AuthServer}, "")
}

// migrateAs is migrate, recorded as done by caller, for reason.
func (r *Runner) migrateAs(ctx context.Context, t *txn, caller authority.Caller, reason string) error {
	cp, f := t.cp, t.f
	from := cp.FlowVersion
	m, _ := f.migration(from)
	node := cp.Node
	if to, ok := m.Nodes[node]; ok && node != "" {
		node = to
	}
	if node != "" && !f.HasNode(node) {
		return &migrationError{fmt.Sprintf("run %s of flow %s is at node %q of version %s, which version %s does not have: declare where it moves (engine.Migration.Nodes)", cp.Run, cp.Flow, cp.Node, from, f.version)}
	}
	state := cp.State
	if m.State != nil {
		next, err := m.State(state.clone())
		if err != nil {
			return &migrationError{fmt.Sprintf("migrating the state of run %s of flow %s from version %s: %v", cp.Run, cp.Flow, from, err)}
		}
		state = next
	}
	if f.fit != nil {
		if err := f.fit(state); err != nil {
			return &migrationError{fmt.Sprintf("the state of run %s of flow %s, migrated from version %s, does not fit version %s: %v", cp.Run, cp.Flow, from, f.version, err)}
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
	t.caller, t.actor = caller, caller.Name
	rec := &protocol.AuditRecord{Action: protocol.ActionMigrated, Node: node, By: caller.Name, Source: cmp.Or(t.in.Source, r.cfg.Source),
		EventID: t.in.EventID, Reason: reason, Migration: &protocol.AuditMigration{From: from, To: f.version, Node: old}}
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

// Migrate is a migrate command: move run, waiting at version From of its
// flow, to version To.
type Migrate struct {
	Flow, Run string
	From, To  string
	Reason    string
	// By names who asked, for the audit record; see [actor].
	By string
	Inbound
}

// Migrate applies a migrate command. A worker whose flow is not at
// version To leaves it to one that is (Outcome.Elsewhere). The run must
// wait at version From; it moves by the flow's migration from From, or as
// it is when To has its node; who may cancel the run may move it. The
// outcome is the audit record migrated, or a refusal.
func (r *Runner) Migrate(ctx context.Context, cmd Migrate) (Outcome, error) {
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	if f, ok := r.flows[cmd.Flow]; !ok || f.version != cmd.To {
		// A worker of To moves it: this one holds the command for them.
		if CheckName("flow", cmd.Flow) != nil || CheckName("run", cmd.Run) != nil {
			return Outcome{Flow: cmd.Flow, Run: cmd.Run, DeadLetter: ReasonInvalidName}, nil
		}
		return Outcome{Flow: cmd.Flow, Run: cmd.Run, Elsewhere: cmd.To}, nil
	}
	f, out, ok := r.lookup(ctx, cmd.Flow, cmd.Run, cmd.Inbound)
	if !ok {
		return out, nil
	}
	for range maxConflicts {
		cp, rev, err := r.load(ctx, cmd.Flow, cmd.Run)
		if errors.Is(err, ErrNotFound) {
			return r.refuse(ctx, cmd.Flow, cmd.Run, "", cmd.Inbound, CodeUnknownRun, "",
				fmt.Sprintf("no run %s of flow %s to migrate; list the runs that wait with `interlock pending %s`", cmd.Run, cmd.Flow, cmd.Flow))
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("engine: loading %s.%s: %w", cmd.Flow, cmd.Run, err)
		}
		if out, done, err := r.repeat(ctx, f, cp, rev, cmd.EventID, cmd.Inbound); done || err != nil {
			return out, err
		}
		t := r.newTxn(f, cp, rev, true, cmd.Inbound, "")
		t.caller = r.caller(cmd.By, cmd.Inbound)
		t.actor = t.caller.Name
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		switch {
		case cp.Status != Waiting:
			return t.refuse(ctx, "", CodeNotWaiting, "run %s is %s; only a waiting run is migrated", cmd.Run, cp.Status)
		case cp.FlowVersion == cmd.To:
			return t.refuse(ctx, "", CodeStaleCheckpoint, "run %s is at version %s already (it moved when a command came, or by another migrate)", cmd.Run, cmd.To)
		case cp.FlowVersion != cmd.From:
			return t.refuse(ctx, "", CodeStaleCheckpoint, "run %s is at version %q, not %s; migrate it from the version it is at", cmd.Run, cp.FlowVersion, cmd.From)
		}
		var ref *authority.Refusal
		if err := r.cfg.Authority.MayCancel(t.caller, t.authorityRun()); errors.As(err, &ref) {
			return t.refuse(ctx, "", ref.Code, "%s (who may cancel a run may migrate it)", ref.Reason)
		}
		t.key = cmd.EventID
		err = r.migrateAs(ctx, t, t.caller, cmd.Reason)
		if isConflict(err) {
			continue
		}
		var stuck *migrationError
		if errors.As(err, &stuck) {
			return t.refuse(ctx, "", CodeInvalidPayload, "%s", stuck.msg)
		}
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: t.rev, Node: cp.Node}, nil
	}
	return Outcome{}, fmt.Errorf("engine: migrate %s.%s: too many concurrent writers", cmd.Flow, cmd.Run)
}

// migrationError is a run a migration cannot move: a node the version
// does not have, a state that does not fit.
type migrationError struct{ msg string }

func (e *migrationError) Error() string { return e.msg }
