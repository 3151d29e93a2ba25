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
	t.Logf("%d runs, %d kills, %d lost, %d duplicated, %d left and driven again, %d stuck, %d audit broken, wall %s, checks %s",
		rep.Runs, rep.Kills, rep.Lost, rep.Duplicated, rep.Left, rep.Stuck, rep.AuditBroken, rep.Wall, rep.Check)
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
