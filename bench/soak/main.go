// Command soak is Interlock's fault soak: it drives runs of
// examples/booking through every interrupt with concurrent agents while it
// kills a worker process, the serve process with its embedded server, or
// one node of a three-node cluster with SIGKILL every second and restarts
// it; then it checks every run (completed exactly once, with the state its
// answers imply, no event published twice, its audit chain intact),
// prints what it found, and exits 1 on any loss.
//
//	go run ./bench/soak -mode worker -runs 2000
//	go run ./bench/soak -mode server -runs 2000
//	go run ./bench/soak -mode node -runs 2000
//	sudo go run ./bench/soak -mode network -runs 2000 -lazy-fsync
//
// See docs/reliability.md, and package internal/soak for what is checked.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/interlockhq/interlock/internal/soak"
)

// defaultTimeout bounds a whole soak.
const defaultTimeout = time.Hour

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal ends the soak; a second ends the process at once.
	context.AfterFunc(ctx, stop)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a bad flag.
type usageError struct{ error }

// errFailed is the error of a soak that found a lost, duplicated or stuck
// run; the report says which.
var errFailed = errors.New("runs were lost, duplicated or stuck, or an audit chain is broken")

// Run runs a soak with the command-line arguments args, printing the
// report to stdout and progress to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg     soak.Config
		mode    string
		asJSON  bool
		timeout time.Duration
	)
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&mode, "mode", string(soak.DefaultMode), "what is killed: worker (a worker process; the NATS server survives), server (serve with its embedded server), node (one node of a 3-node cluster), pause (one node of the cluster stopped with SIGSTOP for -pause, then continued), or network (the cluster of deploy/cluster in network namespaces under partitions, kills and pauses of -pause each; needs root)")
	fs.IntVar(&cfg.Runs, "runs", soak.DefaultRuns, "booking runs driven through every interrupt")
	fs.IntVar(&cfg.Replicas, "replicas", 0, "serve's --replicas on the cluster's nodes, 1 or 3 (0: serve's auto, 3 on the cluster)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "keep starting runs until this long has passed (at least -runs of them); with -kills 0, faults go on as long")
	fs.BoolVar(&cfg.Refunds, "refunds", false, "make every other run a refund whose approval is decided over NATS: edited, rejected, raced, by a quorum, left to its deadlines, cancelled as approved")
	fs.BoolVar(&cfg.Gates, "gates", false, "in network mode, make one run in eight a tool call the gate holds for the supervisor, whose approval two instances of the agent take at once")
	fs.BoolVar(&cfg.Gateway, "gateway", false, "in network mode, make one run in sixteen the same tool call made through interlock mcp gateway on the clients' host, in front of an MCP server whose tool counts its calls")
	fs.BoolVar(&cfg.Asks, "asks", false, "in network mode, make one run in four an ask whose answer Interlock POSTs to a callback URL on the clients' host")
	fs.IntVar(&cfg.Agents, "agents", soak.DefaultAgents, "agents driving runs at once")
	fs.IntVar(&cfg.Workers, "workers", soak.DefaultWorkers, "worker processes in worker mode")
	fs.DurationVar(&cfg.Every, "every", soak.DefaultEvery, "time between two kills")
	fs.IntVar(&cfg.Kills, "kills", 0, "stop killing after this many kills (0: until the runs end); in pause mode, pauses")
	fs.DurationVar(&cfg.Pause, "pause", soak.DefaultPause, "how long pause mode keeps a node stopped, and how long each fault of network mode lasts")
	fs.Func("faults", "network mode's `faults`, comma-separated, injected in turn (default: all of "+faultNames()+")", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(soak.Faults, soak.Fault(f)) {
				return fmt.Errorf("fault %q: use %s", f, faultNames())
			}
			cfg.Faults = append(cfg.Faults, soak.Fault(f))
		}
		return nil
	})
	fs.DurationVar(&cfg.AckWait, "ack-wait", soak.DefaultAckWait, "serve's --ack-wait: how soon a killed worker's command is delivered again")
	fs.BoolVar(&cfg.LazyFsync, "lazy-fsync", false, "run the servers with --lazy-fsync (acknowledged before synced; a killed process loses nothing by it, a machine's crash could)")
	fs.StringVar(&cfg.Binary, "interlock", "", "interlock binary to run (default: built from this module)")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for data and logs, kept (default: a temporary one, removed if the soak passes)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.DurationVar(&timeout, "timeout", defaultTimeout, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./bench/soak [flags]\n\nDrives booking runs while killing Interlock's processes with SIGKILL, then checks every run.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: soak takes only flags", fs.Arg(0))}
	}
	cfg.Mode = soak.Mode(mode)
	ok := false
	for _, m := range soak.Modes {
		ok = ok || cfg.Mode == m
	}
	if !ok {
		return usageError{fmt.Errorf("-mode %q: use worker, server, node, pause or network", mode)}
	}
	if len(cfg.Faults) > 0 && cfg.Mode != soak.ModeNetwork {
		return usageError{errors.New("-faults are network mode's; add -mode network")}
	}
	if cfg.Runs < 1 || cfg.Agents < 1 || cfg.Workers < 1 || cfg.Kills < 0 {
		return usageError{errors.New("-runs, -agents and -workers must be positive, -kills 0 or more")}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg.Progress = stderr
	rep, err := soak.Run(ctx, cfg)
	if werr := write(stdout, rep, asJSON); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return errFailed
	}
	return nil
}

// faultNames lists network mode's faults.
func faultNames() string {
	var out []string
	for _, f := range soak.Faults {
		out = append(out, string(f))
	}
	return strings.Join(out, ", ")
}

// write prints rep as text or JSON.
func write(w io.Writer, rep soak.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mode        %s\n", rep.Mode)
	fmt.Fprintf(&b, "runs        %d\n", rep.Runs)
	fmt.Fprintf(&b, "completed   %d\n", rep.Completed)
	fmt.Fprintf(&b, "kills       %d\n", rep.Kills)
	for _, f := range soak.Faults {
		if n := rep.Faults[f]; n > 0 {
			fmt.Fprintf(&b, "fault       %-15s %3d, healed within %s\n", f, n, rep.Heal[f].Round(10*time.Millisecond))
		}
	}
	if rep.Unhealed > 0 {
		fmt.Fprintf(&b, "unhealed    %d faults (the cluster not whole within 2 minutes)\n", rep.Unhealed)
	}
	fmt.Fprintf(&b, "lost        %d\n", rep.Lost)
	fmt.Fprintf(&b, "duplicated  %d\n", rep.Duplicated)
	fmt.Fprintf(&b, "left        %d (driven again after the others)\n", rep.Left)
	fmt.Fprintf(&b, "stuck       %d\n", rep.Stuck)
	fmt.Fprintf(&b, "audit       %d broken\n", rep.AuditBroken)
	if rep.PendingLeft > 0 && rep.Mode == soak.ModeNetwork {
		fmt.Fprintf(&b, "pending     %d completed yet listed as waiting; %d of them removed by the sweep of the worker's restart\n", rep.PendingLeft, rep.PendingSwept)
	} else {
		fmt.Fprintf(&b, "pending     %d completed yet listed as waiting\n", rep.PendingLeft)
	}
	if rep.Callbacks > 0 {
		fmt.Fprintf(&b, "callbacks   %d received, %d of them retries of one received before\n", rep.Callbacks, rep.CallbackRepeats)
	}
	if rep.LeftExpired > 0 {
		fmt.Fprintf(&b, "expired     %d gate runs left for lack of progress and come back to after their deadline (expired, undecided)\n", rep.LeftExpired)
	}
	if rep.RemindersMoot > 0 {
		fmt.Fprintf(&b, "reminders   %d asks expired before their reminder, held up by a fault, was sent\n", rep.RemindersMoot)
	}
	if rep.GatewayRefunds > 0 || rep.GatewayUnrun > 0 {
		fmt.Fprintf(&b, "gateway     %d refunds made by the tool behind the MCP gateway; of the instances racing them, %d told the approval was taken, %d asked anew; %d approvals taken whose call did not run (the take unanswered)\n",
			rep.GatewayRefunds, rep.GatewayTaken, rep.GatewayAnew, rep.GatewayUnrun)
	}
	if rep.StaleReplica > 0 {
		fmt.Fprintf(&b, "stale       %d listed only by a replica that fell behind (NATS's, not counted as a failure)\n", rep.StaleReplica)
	}
	fmt.Fprintf(&b, "wall        %s (checks %s)\n", rep.Wall.Round(time.Millisecond), rep.Check.Round(time.Millisecond))
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "problem     %s\n", p)
		run, _, _ := strings.Cut(p, ":")
		for _, line := range rep.Histories[run] {
			fmt.Fprintf(&b, "              %s\n", line)
		}
	}
	for _, run := range rep.Unrun {
		fmt.Fprintf(&b, "unrun       %s\n", run)
		for _, line := range rep.Histories[run] {
			fmt.Fprintf(&b, "              %s\n", line)
		}
	}
	if rep.Dir != "" {
		fmt.Fprintf(&b, "logs        %s\n", rep.Dir)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
