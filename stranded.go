package interlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// ErrStrandedRuns is the error of a start refused because runs wait at
// nodes the flows no longer have (see Config.AllowStrandedRuns).
var ErrStrandedRuns = errors.New("interlock: runs wait at nodes the flows no longer have")

// maxStrandedNamed bounds the runs a refused start names.
const maxStrandedNamed = 10

// checkStranded reads the pending index of each flow (one page at a time:
// the waiting runs, never the finished ones) and refuses to start when a
// run waits at a node its flow no longer has, its migrations counted: a
// deploy that renamed or removed the node without saying where its runs
// go would leave them waiting on a version on its way out. allow starts
// anyway, with a warning naming them.
//
// An entry is confirmed with the run's checkpoint in store before it is
// counted: the index may list a run that finished (nats-server's issue
// #8505 brings purged entries back after a crash; the start's sweep
// removes them, after this check), and such a run strands nothing.
func (s *Service) checkStranded(ctx context.Context, store engine.Store, flows []*engine.Flow, allow bool, log zerolog.Logger) error {
	var problems []string
	var workers []protocol.Worker
	workersRead := false
	for _, f := range flows {
		byNode := map[string][]string{}
		byVersion := map[string]int{}
		n := 0
		q := client.PendingQuery{Flow: f.Name(), Limit: client.MaxPendingLimit}
		for {
			page, err := s.client.ListPending(ctx, q)
			if err != nil {
				return fmt.Errorf("interlock: reading the runs of flow %s that wait, to check this build still has their nodes: %w", f.Name(), err)
			}
			for _, p := range page.Items {
				if !f.Takes(p.FlowVersion) {
					byVersion[p.FlowVersion]++
				}
				if _, ok := f.MigratedNode(p.FlowVersion, p.Node); p.Node != "" && !ok {
					if noLongerWaits(ctx, store, p.Flow, p.Run) {
						continue
					}
					n++
					if len(byNode[p.Node]) < maxStrandedNamed {
						byNode[p.Node] = append(byNode[p.Node], p.Run)
					}
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		if len(byVersion) > 0 && !workersRead {
			// Which versions the running workers have: a version none has
			// is said, with how many runs wait on it.
			workers, _ = s.client.Workers(ctx)
			workersRead = true
		}
		for _, v := range slices.Sorted(maps.Keys(byVersion)) {
			if slices.ContainsFunc(workers, func(w protocol.Worker) bool { return w.Carries(f.Name(), v) }) {
				continue
			}
			log.Warn().Str("flow", f.Name()).Str("version", v).Int("runs", byVersion[v]).Str("this_version", f.Version()).
				Msgf("interlock: %d run(s) of flow %s wait on version %s, which no running worker has: their commands stay queued until a worker of version %s runs, "+
					"or this flow (version %s) declares a migration from it (docs/operations.md, Deploying a new version of a flow)",
					byVersion[v], f.Name(), v, v, f.Version())
		}
		if n == 0 {
			continue
		}
		var at []string
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			at = append(at, fmt.Sprintf("at node %q: %s", node, strings.Join(byNode[node], ", ")))
		}
		problem := fmt.Sprintf("flow %s (version %s): %d run(s) wait at nodes it no longer has (%s)", f.Name(), f.Version(), n, strings.Join(at, "; "))
		log.Warn().Str("flow", f.Name()).Str("version", f.Version()).Int("runs", n).Bool("started_anyway", allow).Msg("interlock: " + problem)
		problems = append(problems, problem)
	}
	if len(problems) == 0 || allow {
		return nil
	}
	return fmt.Errorf("%w: %s; this build cannot carry them on. Declare where they go (a migration from their version: engine.Migration), keep the nodes until those runs finish "+
		"(deploy the old flow beside the new, or settle them: interlock cancel), or start anyway with --allow-stranded-runs (Config.AllowStrandedRuns): "+
		"they then wait for a worker of their own version", ErrStrandedRuns, strings.Join(problems, "; "))
}

// noLongerWaits reports whether the run's checkpoint in store says it
// finished, or is gone. A checkpoint that cannot be read is taken to
// wait: the check then errs on the side of refusing.
func noLongerWaits(ctx context.Context, store engine.Store, flow, run string) bool {
	cp, _, err := store.Load(ctx, flow, run)
	if errors.Is(err, engine.ErrNotFound) {
		return true
	}
	return err == nil && cp.Status.Finished()
}
