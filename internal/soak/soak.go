// Package soak is Interlock's fault soak: it drives runs of examples/booking
// through every interrupt with several concurrent agents while it kills
// Interlock's processes with SIGKILL and restarts them, then checks every
// run: completed exactly once, its final state exactly what its answers
// imply, no event of a transition published twice, and its audit chain
// intact ([client.Client.VerifyAudit]).
//
// [Run] does one soak with a [Config]; `go run ./bench/soak` is its
// command line, and TestSoakKilledWorkersLoseNothing runs a short one on
// every test run. What a [Mode] kills:
//
//   - [ModeWorker]: a worker process (`interlock serve --nats-url`), one of
//     several on a NATS server that runs in a serve process of its own.
//   - [ModeServer]: the one `interlock serve`, its embedded NATS server
//     with it.
//   - [ModeNode]: one node of three `interlock serve` processes that form a
//     JetStream cluster on loopback, streams and buckets replicated 3 times.
//   - [ModePause]: not killed but paused: one node of the same cluster
//     stopped with SIGSTOP for Config.Pause, long enough for its peers to
//     elect new leaders without it, then continued with SIGCONT, its
//     connections and its stale leaderships as it left them.
//   - [ModeNetwork]: the three nodes of deploy/cluster (TLS, the users of
//     deploy/interlock-auth.conf), each in a Linux network namespace of
//     its own on a bridge ([netns]), and a worker process on the clients'
//     host, under [Faults] in turn: partitions that isolate a node, its
//     stream leader or cut two nodes apart, a node killed or paused, the
//     worker killed. The agents connect from the clients' host as the
//     agent user. It needs root and the ip command.
//
// The processes run an `interlock` binary built once ([Build]).
// Everything listens on 127.0.0.1 only. The workers authenticate to the
// embedded server as its workers user with a random password the soak
// makes and passes in INTERLOCK_WORKERS_PASSWORD; the agents connect
// without credentials, with the rights of any client; every process gets
// the same random resume-token secret in INTERLOCK_SECRET.
package soak

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Mode is what a soak kills.
type Mode string

// The modes.
const (
	// ModeWorker kills worker processes; the NATS server survives.
	ModeWorker Mode = "worker"
	// ModeServer kills the one serve process with its embedded server.
	ModeServer Mode = "server"
	// ModeNode kills one node of a three-node cluster at a time.
	ModeNode Mode = "node"
	// ModePause pauses one node of a three-node cluster at a time
	// (SIGSTOP, then SIGCONT after Config.Pause).
	ModePause Mode = "pause"
	// ModeNetwork runs the cluster in network namespaces and injects
	// Faults in turn.
	ModeNetwork Mode = "network"
)

// clustered reports whether m runs the three-node cluster.
func (m Mode) clustered() bool { return m == ModeNode || m == ModePause || m == ModeNetwork }

// Modes lists the modes, for flags and messages.
var Modes = []Mode{ModeWorker, ModeServer, ModeNode, ModePause, ModeNetwork}

// Defaults of a Config.
const (
	DefaultMode     = ModeWorker
	DefaultRuns     = 2000
	DefaultAgents   = 16
	DefaultWorkers  = 2
	DefaultEvery    = time.Second
	DefaultAckWait  = 2 * time.Second
	DefaultPatience = 2 * time.Minute
	// DefaultPause is how long ModePause keeps a node stopped: longer
	// than the few seconds its peers take to find it gone and elect new
	// leaders.
	DefaultPause = 5 * time.Second
	// DefaultRetry is how long an agent waits for a command to take
	// effect before it publishes it again.
	DefaultRetry = 5 * time.Second
)

// Config configures a soak.
type Config struct {
	// Mode is what is killed. Defaults to DefaultMode.
	Mode Mode
	// Runs is how many runs are driven to their end, at least: with a
	// number of Kills, the agents start more until the last kill (up to
	// ten times as many), so that every fault strikes under load.
	// Defaults to DefaultRuns.
	Runs int
	// Agents is how many runs are driven at once, each by its own
	// goroutine. Defaults to DefaultAgents.
	Agents int
	// Workers is how many worker processes run in ModeWorker. Defaults to
	// DefaultWorkers.
	Workers int
	// Every is the time between two kills (a kill waits, too, until the
	// process killed before is serving again). Defaults to DefaultEvery.
	Every time.Duration
	// Kills stops the killing after this many; 0 kills until the runs are
	// driven to their end. In ModePause, a kill is a pause.
	Kills int
	// Pause is how long ModePause keeps a node stopped, and how long each
	// fault of ModeNetwork lasts. Defaults to DefaultPause.
	Pause time.Duration
	// Replicas is serve's --replicas on the cluster's nodes: 1 or 3; 0
	// leaves serve's auto, which picks 3 on a three-node cluster.
	Replicas int
	// Duration, if set, keeps the agents starting runs until it has
	// passed since the first (and at least Runs of them): a soak of a
	// given length.
	Duration time.Duration
	// Refunds makes every other run a run of examples/refund whose
	// approval people decide over NATS on its role subjects: edited,
	// rejected, raced by two decisions, decided by a quorum of two roles,
	// left to its deadlines, cancelled as it is approved, or approved as
	// its deadline falls due, in turn. In ModeNetwork an agent forges an
	// approval too, which must be refused.
	Refunds bool
	// Asks makes one run in four (ModeNetwork) an ask with a callback
	// URL on the clients' host, approved or rejected over NATS by the
	// supervisor, or left to its deadline after a reminder: its outcome
	// must reach the URL, once per outcome, over the network, through
	// Interlock's outbound policy.
	Asks bool
	// Gates makes one run in eight (ModeNetwork) a tool call the gate
	// holds for the supervisor (examples/gate/rules.yaml), approved over
	// NATS, whose approval two instances of the agent then take at once:
	// exactly one take may succeed, so the call runs once.
	Gates bool
	// Gateway makes one run in sixteen (ModeNetwork) the same tool call
	// made through `interlock mcp gateway` on the clients' host, in front
	// of an MCP server there whose tool counts its calls: made again while
	// it waits, approved over NATS, then made by two instances of the
	// agent at once, it must run once.
	Gateway bool
	// Faults are the faults ModeNetwork injects, in turn. Defaults to
	// every one of Faults.
	Faults []Fault
	// Deploy is the directory of Interlock's deploy/ configurations that
	// ModeNetwork runs (with Gates, the gate's rules are those of
	// examples/gate/rules.yaml beside it). Defaults to the deploy/ of the
	// module the go command finds.
	Deploy string
	// AckWait is serve's --ack-wait: how soon a command a killed worker
	// held is delivered again. Defaults to DefaultAckWait.
	AckWait time.Duration
	// LazyFsync runs the servers with serve's --lazy-fsync: acknowledged
	// before synced. A killed process loses nothing by it (its writes are
	// in the kernel's page cache); only a machine's crash tells the two
	// apart. Three cluster nodes on one disk are far slower syncing every
	// write.
	LazyFsync bool
	// Retry is how long an agent waits for a command to take effect before
	// it publishes it again, with the same Nats-Msg-Id. Defaults to
	// DefaultRetry.
	Retry time.Duration
	// Patience is how long an agent keeps at a run that makes no progress
	// before it leaves it; the agents come back to the runs they left
	// once all the others are driven, and a run not ended then is stuck.
	// Defaults to DefaultPatience.
	Patience time.Duration
	// Binary is the interlock binary to run. Defaults to one built with
	// [Build] in Dir.
	Binary string
	// Dir holds the data directories and the processes' logs. Defaults to
	// a temporary directory, removed at the end unless the soak failed.
	Dir string
	// Progress receives a line every few seconds and a line per kill.
	// Defaults to io.Discard.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	c.Mode = cmp.Or(c.Mode, DefaultMode)
	c.Runs = cmp.Or(c.Runs, DefaultRuns)
	c.Agents = cmp.Or(c.Agents, DefaultAgents)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.Every = cmp.Or(c.Every, DefaultEvery)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.Retry = cmp.Or(c.Retry, DefaultRetry)
	c.Patience = cmp.Or(c.Patience, DefaultPatience)
	c.Pause = cmp.Or(c.Pause, DefaultPause)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	c.Progress = &lockedWriter{w: c.Progress}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Mode != ModeWorker && c.Mode != ModeServer && !c.Mode.clustered():
		return fmt.Errorf("soak: Config.Mode is %q; use worker, server, node, pause or network", c.Mode)
	case c.Runs < 1:
		return fmt.Errorf("soak: Config.Runs is %d; it must be positive", c.Runs)
	case c.Agents < 1:
		return fmt.Errorf("soak: Config.Agents is %d; it must be positive", c.Agents)
	case c.Workers < 1:
		return fmt.Errorf("soak: Config.Workers is %d; it must be positive", c.Workers)
	case c.Every < 10*time.Millisecond:
		return fmt.Errorf("soak: Config.Every is %s; it must be at least 10ms", c.Every)
	case c.Kills < 0:
		return fmt.Errorf("soak: Config.Kills is %d; it must be 0 or more", c.Kills)
	case c.AckWait < time.Second:
		return fmt.Errorf("soak: Config.AckWait is %s; it must be at least 1s", c.AckWait)
	case c.Replicas != 0 && c.Replicas != 1 && c.Replicas != 3:
		return fmt.Errorf("soak: Config.Replicas is %d; use 1 or 3 (0 for serve's auto)", c.Replicas)
	case c.Replicas != 0 && !c.Mode.clustered():
		return fmt.Errorf("soak: Config.Replicas is for the cluster's modes (node, pause, network), not %s", c.Mode)
	case c.Gates && c.Mode != ModeNetwork:
		return fmt.Errorf("soak: Config.Gates is ModeNetwork's")
	case c.Gateway && c.Mode != ModeNetwork:
		return fmt.Errorf("soak: Config.Gateway is ModeNetwork's: the gateway and its upstream run on the clients' host")
	case c.Asks && c.Mode != ModeNetwork:
		return fmt.Errorf("soak: Config.Asks is ModeNetwork's: its callbacks are received on the clients' host")
	case len(c.Faults) > 0 && c.Mode != ModeNetwork:
		return fmt.Errorf("soak: Config.Faults are ModeNetwork's; mode %s injects its own", c.Mode)
	case c.Retry <= 0 || c.Patience <= 0:
		return fmt.Errorf("soak: Config.Retry (%s) and Config.Patience (%s) must be positive", c.Retry, c.Patience)
	}
	return nil
}

// Report is what a soak found.
type Report struct {
	Mode Mode `json:"mode"`
	// Runs is how many runs were driven; Completed how many completed
	// exactly as their answers imply.
	Runs      int `json:"runs"`
	Completed int `json:"completed"`
	// Kills is how many times a process was killed with SIGKILL, paused,
	// or (ModeNetwork) a fault injected.
	Kills int `json:"kills"`
	// Faults counts ModeNetwork's faults by kind; Heal is the longest
	// time each kind took to heal (from the fault's end to every stream
	// with a leader and every replica caught up); Unhealed counts faults
	// after which the cluster was not whole again within two minutes.
	Faults   map[Fault]int           `json:"faults,omitempty"`
	Heal     map[Fault]time.Duration `json:"heal,omitempty"`
	Unhealed int                     `json:"unhealed,omitempty"`
	// Lost counts runs missing, or missing an answer, a started, resumed or
	// completed event.
	Lost int `json:"lost"`
	// Duplicated counts runs with an answer applied twice, or an event of
	// one transition published twice.
	Duplicated int `json:"duplicated"`
	// Left counts runs an agent left for lack of progress (see
	// Config.Patience) and the agents drove again after all the others.
	Left int `json:"left"`
	// Stuck counts runs that had not ended when the agents were done,
	// those left included.
	Stuck int `json:"stuck"`
	// AuditBroken counts runs whose audit chain does not verify.
	AuditBroken int `json:"auditBroken"`
	// PendingLeft counts runs that completed but that the pending index
	// (what inboxes list as waiting) still lists.
	PendingLeft int `json:"pendingLeft"`
	// PendingSwept counts the runs of PendingLeft whose entries the
	// sweep of a worker's start removed: in network mode, once the check
	// found runs left listed, the soak restarts the worker process,
	// whose start sweeps the index (kv.Store.SweepPending), and reads
	// the bucket's leader again.
	PendingSwept int `json:"pendingSwept"`
	// StaleReplica counts runs the pending index listed only through a
	// replica that fell behind: the bucket's leader had removed their
	// entries, and direct gets still listed them 30 s after every run
	// ended. NATS's doing, not Interlock's; not counted against OK.
	StaleReplica int `json:"staleReplica,omitempty"`
	// Callbacks counts the POSTs the asks' callback URLs received, and
	// CallbackRepeats those that repeated one received before (a retry,
	// the same webhook-id), which the receiver must take as one.
	Callbacks       int `json:"callbacks,omitempty"`
	CallbackRepeats int `json:"callbackRepeats,omitempty"`
	// RemindersMoot counts asks left to their deadline that expired
	// without their reminder, due two seconds before: a fault held the
	// reminder's worker up (backing off after a refused read) until the
	// deadline had been applied, and a reminder of what no longer waits
	// is not sent.
	RemindersMoot int `json:"remindersMoot,omitempty"`
	// LeftExpired counts the gate runs (through the gateway or not) the
	// agents left for lack of progress and came back to after their
	// deadline (the rule's 30 minutes): expired, undecided, as a run
	// nobody decided in time must be.
	LeftExpired int `json:"leftExpired,omitempty"`
	// GatewayRefunds counts the refunds the tool behind the MCP gateway
	// made (Config.Gateway), and GatewayUnrun the gateway's calls whose
	// approval was taken yet whose tool never ran: the gateway's take
	// went unanswered for its whole repeat window, and the agent was told
	// that the call did not run. At most once, never twice.
	GatewayRefunds int `json:"gatewayRefunds,omitempty"`
	GatewayUnrun   int `json:"gatewayUnrun,omitempty"`
	// Unrun names the runs GatewayUnrun counts, each with its history in
	// Histories.
	Unrun []string `json:"unrun,omitempty"`
	// GatewayTaken and GatewayAnew count the instances that, making an
	// approved call at the same time as another, were told its approval
	// was taken (it did not run), or found it taken before they asked and
	// were asked anew (a new call, which the soak's supervisor rejects).
	GatewayTaken int `json:"gatewayTaken,omitempty"`
	GatewayAnew  int `json:"gatewayAnew,omitempty"`
	// Wall is the time from the first start to the last run's end; Check
	// the time the checks took after it.
	Wall  time.Duration `json:"wall"`
	Check time.Duration `json:"check"`
	// Problems describe the first problems found, one per run.
	Problems []string `json:"problems,omitempty"`
	// Histories show each run of Problems and Unrun: what its agents were told of
	// every command they sent (acknowledged, as a duplicate, or not), its
	// events as the stream holds them, and its checkpoint at the end.
	Histories map[string][]string `json:"histories,omitempty"`
	// Dir is where the processes' logs are kept, when the soak failed.
	Dir string `json:"dir,omitempty"`
}

// maxProblems bounds Report.Problems.
const maxProblems = 20

// OK reports whether every run completed exactly once, as its answers
// imply, with its audit chain intact.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Stuck == 0 && r.AuditBroken == 0 && r.PendingLeft == 0 && r.Unhealed == 0 && r.Completed == r.Runs
}

// Run does one soak. The error is for what kept the soak from running or
// checking (a process that would not start, a server unreachable at the
// end); what it found is in the Report, whose OK says whether it passed.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	rep.Mode, rep.Runs = cfg.Mode, cfg.Runs
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "interlock-soak-"); err != nil {
			return rep, fmt.Errorf("soak: %w", err)
		}
		defer func() {
			if err == nil && rep.OK() {
				err = os.RemoveAll(dir)
			} else {
				rep.Dir = dir
			}
		}()
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return rep, fmt.Errorf("soak: creating -dir %s: %w", dir, err)
	}
	if cfg.Binary == "" {
		if cfg.Binary, err = Build(ctx, dir); err != nil {
			return rep, err
		}
	}
	d, err := deploy(ctx, cfg, dir)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()

	agentConn, err := d.agentConn("interlock-soak")
	if err != nil {
		return rep, err
	}
	a, err := newAgents(ctx, cfg, agentConn)
	if err != nil {
		return rep, err
	}
	defer a.close()
	a.acked = &sync.Map{}
	if err := d.approvers(ctx, a); err != nil {
		return rep, err
	}
	a.gateway, a.leftRuns = &sync.Map{}, &sync.Map{}
	if d.network != nil {
		a.callbacks = d.network.callbacks
		a.upstream = d.network.upstream
	}
	if cfg.Gateway {
		if err := a.connectGateway(ctx, d.network); err != nil {
			return rep, err
		}
	}

	// In the cluster's modes, kills wait for the cluster to be whole,
	// which the workers' user may see (an agent may not list the
	// streams). That user checks the runs at the end, too: it reads every
	// stream.
	checker := a
	var js jetstream.JetStream
	if cfg.Mode.clustered() {
		wc, err := d.watchConn("interlock-soak-watch")
		if err != nil {
			return rep, err
		}
		if checker, err = newAgents(ctx, cfg, wc); err != nil {
			return rep, fmt.Errorf("soak: connecting to watch the cluster: %w", err)
		}
		defer checker.close()
		checker.approvers, checker.authenticated, checker.callbacks, checker.acked = a.approvers, a.authenticated, a.callbacks, a.acked
		checker.upstream, checker.gateway, checker.secret, checker.leftRuns = a.upstream, a.gateway, a.secret, a.leftRuns
		js = checker.js
	}

	began := time.Now()
	driving, stopDriving := context.WithCancel(ctx)
	defer stopDriving()
	var (
		kills   atomic.Int64
		wg      sync.WaitGroup
		killErr error
		flog    faultLog
	)
	// While faults are still to come, the agents start more runs.
	var faulting chan struct{}
	if cfg.Kills > 0 {
		faulting = make(chan struct{})
	}
	wg.Go(func() {
		if faulting != nil {
			defer close(faulting)
		}
		if cfg.Mode == ModeNetwork {
			killErr = faults(driving, cfg, d, js, &kills, &flog)
		} else {
			killErr = kill(driving, cfg, d, js, &kills)
		}
		if killErr != nil {
			stopDriving() // a process that will not start again ends the soak
		}
	})
	wg.Go(func() { report(driving, cfg.Progress, a, &kills, began) })
	err = a.drive(driving, cfg, faulting)
	stopDriving()
	wg.Wait()
	if killErr != nil {
		err = killErr
	}
	rep.Kills = int(kills.Load())
	rep.Faults, rep.Heal, rep.Unhealed = flog.byKind, flog.heal, flog.unhealed
	rep.Left = int(a.left.Load())
	rep.Wall = time.Since(began)
	rep.Runs = int(a.runs.Load())
	cfg.Runs = rep.Runs
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(cfg.Progress, "soak: %d runs driven in %s with %d kills; checking every run\n", cfg.Runs, rep.Wall.Round(time.Millisecond), rep.Kills)
	checked := time.Now()
	err = checker.check(ctx, cfg, &rep)
	if err == nil && rep.PendingLeft > 0 && d.network != nil {
		fmt.Fprintf(cfg.Progress, "soak: %d completed runs still listed as waiting; restarting the worker, whose start sweeps the pending index\n", rep.PendingLeft)
		rep.PendingSwept, err = checker.sweptByRestart(ctx, d.network.worker)
	}
	rep.Callbacks, rep.CallbackRepeats = a.callbacks.counts()
	checker.moot.Range(func(any, any) bool { rep.RemindersMoot++; return true })
	checker.leftExpired.Range(func(any, any) bool { rep.LeftExpired++; return true })
	checker.unrun.Range(func(i, _ any) bool {
		rep.GatewayUnrun++
		rep.Unrun = append(rep.Unrun, runID(i.(int)))
		return true
	})
	slices.Sort(rep.Unrun)
	rep.GatewayRefunds = a.upstream.total()
	rep.GatewayTaken, rep.GatewayAnew = int(a.gatewayTaken.Load()), int(a.gatewayAnew.Load())
	if err == nil {
		checker.histories(ctx, cfg, a, &rep)
	}
	rep.Check = time.Since(checked)
	return rep, err
}

// report prints progress every few seconds until ctx is done.
func report(ctx context.Context, w io.Writer, a *agents, kills *atomic.Int64, began time.Time) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(w, "soak: %s: %d of %d runs ended, %d kills\n", time.Since(began).Round(time.Second), a.ended.Load(), a.runs.Load(), kills.Load())
		}
	}
}

// Build builds the interlock command into dir and returns the binary's
// path. It runs the go command, so it works inside Interlock's module (or
// with it in the module cache).
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "interlock")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/interlockhq/interlock/cmd/interlock")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("soak: building the interlock command: %w\n%s", err, out)
	}
	return bin, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedWriter serialises the progress lines of the soak's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
