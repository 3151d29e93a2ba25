package soak_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/internal/soak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSoakKilledWorkersLoseNothing drives 300 booking runs through all
// five interrupts while a worker process is killed with SIGKILL every
// half second, ten times, and restarted: every run completes once, with
// the state its answers imply, no event twice, and an intact audit chain.
func TestSoakKilledWorkersLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the interlock command and runs it in several processes")
	}
	t.Parallel()
	dir := t.TempDir()
	bin, err := soak.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	rep, err := soak.Run(t.Context(), soak.Config{
		Mode: soak.ModeWorker, Runs: 300, Agents: 16, Workers: 2,
		Every: 500 * time.Millisecond, Kills: 10, AckWait: time.Second,
		Binary: bin, Dir: dir, Progress: &progress,
	})
	t.Logf("%d runs, %d kills, %d lost, %d duplicated, %d left and driven again, %d stuck, %d audit broken, %d still listed as waiting, wall %s, checks %s",
		rep.Runs, rep.Kills, rep.Lost, rep.Duplicated, rep.Left, rep.Stuck, rep.AuditBroken, rep.PendingLeft, rep.Wall, rep.Check)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !rep.OK() {
		t.Fatalf("the soak found problems (logs in %s):\n%s\n%s", dir, strings.Join(rep.Problems, "\n"), progress.String())
	}
	if rep.Kills == 0 {
		t.Fatalf("the runs ended before any worker was killed:\n%s", progress.String())
	}
}

// TestSoakPausedNodesLoseNothing drives 150 booking runs on a three-node
// cluster while one node at a time is stopped with SIGSTOP for three
// seconds (its peers elect leaders without it), then continued with its
// connections and stale leaderships as it left them, four times: every
// run completes once, with the state its answers imply, no event twice,
// and an intact audit chain.
func TestSoakPausedNodesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the interlock command and runs it in several processes")
	}
	t.Parallel()
	dir := t.TempDir()
	bin, err := soak.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	rep, err := soak.Run(t.Context(), soak.Config{
		Mode: soak.ModePause, Runs: 150, Agents: 16, Pause: 3 * time.Second,
		Every: 500 * time.Millisecond, Kills: 4, AckWait: time.Second, LazyFsync: true,
		Binary: bin, Dir: dir, Progress: &progress,
	})
	t.Logf("%d runs, %d pauses, %d lost, %d duplicated, %d left and driven again, %d stuck, %d audit broken, %d still listed as waiting, wall %s, checks %s",
		rep.Runs, rep.Kills, rep.Lost, rep.Duplicated, rep.Left, rep.Stuck, rep.AuditBroken, rep.PendingLeft, rep.Wall, rep.Check)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !rep.OK() {
		t.Fatalf("the soak found problems (logs in %s):\n%s\n%s", dir, strings.Join(rep.Problems, "\n"), progress.String())
	}
	if rep.Kills == 0 {
		t.Fatalf("the runs ended before any node was paused:\n%s", progress.String())
	}
}
