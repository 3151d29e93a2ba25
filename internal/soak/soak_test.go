package soak_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/internal/netns"
	"github.com/interlockhq/interlock/internal/soak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run builds the interlock command, runs a soak of cfg with it and fails
// the test, with the problems' histories and the soak's progress, unless
// the soak passed and struck at least once.
func run(t *testing.T, cfg soak.Config) soak.Report {
	t.Helper()
	dir := t.TempDir()
	bin, err := soak.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	cfg.Binary, cfg.Dir, cfg.Progress = bin, dir, &progress
	rep, err := soak.Run(t.Context(), cfg)
	t.Logf("%d runs, %d kills %v, healed within %v, %d lost, %d duplicated, %d left and driven again, %d stuck, %d audit broken, %d still listed as waiting, %d listed by a stale replica, %d callbacks (%d retries), %d refunds through the MCP gateway (%d approvals taken without the call run), wall %s, checks %s",
		rep.Runs, rep.Kills, rep.Faults, rep.Heal, rep.Lost, rep.Duplicated, rep.Left, rep.Stuck, rep.AuditBroken, rep.PendingLeft, rep.StaleReplica, rep.Callbacks, rep.CallbackRepeats, rep.GatewayRefunds, rep.GatewayUnrun, rep.Wall, rep.Check)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !rep.OK() {
		var b strings.Builder
		for _, p := range rep.Problems {
			b.WriteString(p + "\n")
			run, _, _ := strings.Cut(p, ":")
			for _, line := range rep.Histories[run] {
				b.WriteString("    " + line + "\n")
			}
		}
		t.Fatalf("the soak found problems (logs in %s):\n%s\n%s", dir, b.String(), progress.String())
	}
	if rep.Kills == 0 {
		t.Fatalf("the runs ended before anything was struck:\n%s", progress.String())
	}
	return rep
}

// TestSoakKilledWorkersLoseNothing drives 300 booking runs through all
// five interrupts while a worker process is killed with SIGKILL every
// half second, ten times, and restarted: every run completes once, with
// the state its answers imply, no event twice, and an intact audit chain.
func TestSoakKilledWorkersLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the interlock command and runs it in several processes")
	}
	t.Parallel()
	run(t, soak.Config{
		Mode: soak.ModeWorker, Runs: 300, Agents: 16, Workers: 2,
		Every: 500 * time.Millisecond, Kills: 10, AckWait: time.Second,
	})
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
	run(t, soak.Config{
		Mode: soak.ModePause, Runs: 150, Agents: 16, Pause: 3 * time.Second,
		Every: 500 * time.Millisecond, Kills: 4, AckWait: time.Second, LazyFsync: true,
	})
}

// TestSoakNetworkFaultsLoseNothing runs the three nodes of deploy/cluster
// (TLS, the users of deploy/interlock-auth.conf), each in a network
// namespace of its own, and a worker process beside the clients, under
// every fault in turn, each for six seconds (longer than an election):
// a node cut from the others, the worker killed, two nodes cut from each
// other while both reach the third, a node killed and restarted, the node
// leading the runs bucket cut off, a node paused. Agents drive booking
// runs, asks answered to callback URLs, gated calls whose approval two
// instances take at once, the same calls through the MCP gateway (each
// refund made by the tool behind it once), and refunds whose approvals are edited,
// rejected, raced, voted by a quorum, left to their deadlines and
// cancelled as approved, and forge an approval each time: every run ends
// as its decisions imply, every callback arrives, every approval is taken
// once, no event twice, no decision by anyone not entitled to it, each
// deadline once, every audit chain intact, the pending index matching,
// and the cluster whole again after each fault.
func TestSoakNetworkFaultsLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the interlock command and runs it in several processes")
	}
	if err := netns.Available(); err != nil {
		t.Skipf("no network namespaces on this machine, so no partitions (%v); run as root with iproute2 to test them", err)
	}
	t.Parallel()
	rep := run(t, soak.Config{
		Mode: soak.ModeNetwork, Refunds: true, Asks: true, Gates: true, Gateway: true, Runs: 120, Agents: 16, Pause: 6 * time.Second,
		Every: 500 * time.Millisecond, Kills: len(soak.Faults), AckWait: time.Second, LazyFsync: true,
	})
	for _, f := range soak.Faults {
		if rep.Faults[f] == 0 {
			t.Errorf("fault %s was never injected", f)
		}
	}
	if rep.Callbacks == 0 {
		t.Error("no ask's callback URL was called")
	}
	if rep.GatewayRefunds == 0 {
		t.Error("no call through the MCP gateway reached its tool")
	}
}
