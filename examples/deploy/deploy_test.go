//go:build unix

package deploy_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// runsFlag is how many runs pause on version 1: the suite's short
// version; go test ./examples/deploy -args -runs 100 runs the long one.
var runsFlag = flag.Int("runs", 20, "runs paused on version 1 before the deploy (even)")

// build builds a command of examples/deploy into dir.
func build(t *testing.T, dir, cmd string) string {
	t.Helper()
	bin := filepath.Join(dir, cmd)
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./"+cmd).CombinedOutput(); err != nil {
		t.Fatalf("go build ./%s: %v\n%s", cmd, err, out)
	}
	return bin
}

// proc is one running build: a worker process of the deployment.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	log    *strings.Builder
	mu     *sync.Mutex
}

// start runs bin as instance against url, and returns once it serves.
func start(t *testing.T, bin, url, instance string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "-nats-url", url, "-instance", instance, "-ack-wait", "3s")
	cmd.Env = append(os.Environ(), "INTERLOCK_WORKERS_PASSWORD="+natstest.WorkersPassword)
	r, w := io.Pipe()
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: &strings.Builder{}, mu: &sync.Mutex{}}
	go func() {
		p.err = cmd.Wait()
		_ = w.Close()
		close(p.exited)
	}()
	serving := make(chan struct{})
	go func() {
		once := sync.OnceFunc(func() { close(serving) })
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), `"message":"serving flow payout`) {
				once()
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	select {
	case <-serving:
	case <-p.exited:
		t.Fatalf("%s exited before serving: %v\n%s", instance, p.err, p.logged())
	case <-time.After(time.Minute):
		t.Fatalf("%s did not serve within a minute:\n%s", instance, p.logged())
	}
	return p
}

func (p *proc) logged() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop signals the process and waits for it to exit.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after %v", sig)
	}
	if sig == syscall.SIGTERM && p.err != nil {
		t.Errorf("after SIGTERM: %v\n%s", p.err, p.logged())
	}
}

// TestARollingDeployLosesNoRunAndRunsNoneTwice runs the two builds of
// examples/deploy as processes on one NATS server: runs paused on
// version 1 at both of its nodes; version 2 started beside it while
// decisions arrive; version 1 stopped; each worker of version 2 killed
// with kill -9 in turn, and another started, while decisions arrive. Every run completes once, on
// version 1 or moved to version 2 by its migration (and then audited so),
// new runs start on version 2, every audit chain verifies, and nothing is
// dead-lettered.
func TestARollingDeployLosesNoRunAndRunsNoneTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two services")
	}
	v1bin, v2bin := build(t, t.TempDir(), "v1"), build(t, t.TempDir(), "v2")
	srv := natstest.StartServer(t, "")
	url := srv.ClientURL()
	rollingDeploy(t, v1bin, v2bin, url, [3]string{url, url, url})
}

// TestARollingDeployOnAThreeNodeClusterLosesNoRunAndRunsNoneTwice is the
// same on a three-node cluster (streams and buckets of three replicas),
// each process connected to a node of its own.
func TestARollingDeployOnAThreeNodeClusterLosesNoRunAndRunsNoneTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two services")
	}
	v1bin, v2bin := build(t, t.TempDir(), "v1"), build(t, t.TempDir(), "v2")
	c := natstest.StartCluster(t, 3)
	rollingDeploy(t, v1bin, v2bin, c.URLs(), [3]string{c.Nodes[0].ClientURL(), c.Nodes[1].ClientURL(), c.Nodes[2].ClientURL()})
}

// rollingDeploy runs the deploy against the server at url (the client's),
// the three processes at urls.
func rollingDeploy(t *testing.T, v1bin, v2bin, url string, urls [3]string) {
	nc, js := natstest.Connect(t, url)
	names, _ := wire.NewNames("")
	c := client.New(nc, js, names, "/deploy-test", 30*time.Second)
	ctx := t.Context()

	v1 := start(t, v1bin, urls[0], "payout-1")
	runs := *runsFlag
	run := func(i int) string { return fmt.Sprintf("p-%02d", i) }
	decide := func(i int) {
		t.Helper()
		in, err := c.LastInterrupt(ctx, "payout", run(i))
		if err != nil {
			t.Fatalf("%s: %v", run(i), err)
		}
		r := protocol.Resume{RequestID: in.RequestID, ResumeToken: in.ResumeToken, Approver: "fin"}
		var ev client.Event
		if in.Kind == protocol.KindApproval {
			r.Decision = "approve"
			ev, err = c.ResumeWithRole(ctx, "payout", run(i), "finance", r)
		} else {
			r.Answers = map[string]json.RawMessage{"reference": json.RawMessage(`"TX-` + run(i) + `"`)}
			ev, err = c.Resume(ctx, "payout", run(i), r)
		}
		if err != nil || ev.Kind == protocol.EventRefused {
			t.Fatalf("deciding %s at %s: %v %s", run(i), in.Node, err, ev.Event.Data())
		}
	}
	for i := range runs {
		if _, err := c.Start(ctx, "payout", run(i), map[string]json.RawMessage{"amount": json.RawMessage(`48.5`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range runs / 2 { // half wait at confirm, half at review
		decide(i)
	}

	v2 := start(t, v2bin, urls[1], "payout-2")
	// Every worker learns of version 2 from the workers bucket, a moment
	// after it starts: from then on new runs start on it.
	probe := 0
	natstest.Eventually(t, "five starts in a row on version 2", func() bool {
		for range 5 {
			probe++
			run := fmt.Sprintf("probe-%d", probe)
			if _, err := c.Start(ctx, "payout", run, nil, nil); err != nil {
				t.Fatal(err)
			}
			if cp, err := c.Checkpoint(ctx, "payout", run); err != nil || cp.FlowVersion != "2" {
				return false
			}
		}
		return true
	})
	for i := runs; i < runs+5; i++ { // new runs start on version 2
		if _, err := c.Start(ctx, "payout", run(i), map[string]json.RawMessage{"amountCents": json.RawMessage(`4850`)}, nil); err != nil {
			t.Fatal(err)
		}
		if cp, err := c.Checkpoint(ctx, "payout", run(i)); err != nil || cp.FlowVersion != "2" {
			t.Errorf("%s, started with version 2 running, is at version %v (%v)", run(i), cp.FlowVersion, err)
		}
	}
	for i := range 5 { // side by side
		decide(i)
		decide(runs/2 + i)
	}
	v1.stop(t, syscall.SIGTERM)

	// kill -9 each worker of version 2 in turn while decisions are on
	// their way, and start it again: what it had in hand is delivered
	// again.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 5; i < runs/2; i++ {
			decide(i)
		}
	})
	v2.stop(t, syscall.SIGKILL)
	v2b := start(t, v2bin, urls[2], "payout-2b")
	v2b.stop(t, syscall.SIGKILL)
	start(t, v2bin, urls[0], "payout-2c")
	wg.Wait()
	for i := runs / 2; i < runs+5; i++ {
		for {
			cp, err := c.Checkpoint(ctx, "payout", run(i))
			if err != nil {
				t.Fatal(err)
			}
			if cp.Status != protocol.StatusWaiting {
				break
			}
			decide(i)
		}
	}

	byVersion := map[string]int{}
	defer func() { t.Logf("runs confirmed by version: %v", byVersion) }()
	for i := range runs + 5 {
		cp, err := c.Checkpoint(ctx, "payout", run(i))
		if err != nil || cp.Status != protocol.StatusCompleted {
			t.Errorf("%s: %v (%v), want completed", run(i), cp.Status, err)
			continue
		}
		var st struct {
			ConfirmedBy string `json:"confirmedBy"`
			AmountCents int64  `json:"amountCents"`
			Recorded    bool   `json:"recorded"`
		}
		_ = json.Unmarshal(cp.State, &st)
		byVersion[st.ConfirmedBy]++
		recs, err := c.Audit(ctx, "payout", run(i))
		if err != nil {
			t.Fatal(err)
		}
		migrated := 0
		for _, rec := range recs {
			if rec.Action == protocol.ActionMigrated {
				migrated++
			}
		}
		switch {
		case i >= runs && (st.ConfirmedBy != "2" || migrated != 0 || !st.Recorded):
			t.Errorf("%s, started on version 2: %+v, %d migrations", run(i), st, migrated)
		case i < runs && st.ConfirmedBy == "1" && migrated != 0:
			t.Errorf("%s completed on version 1 but was migrated", run(i))
		case i < runs && st.ConfirmedBy == "2" && (migrated != 1 || st.AmountCents != 4850 || !st.Recorded):
			t.Errorf("%s completed on version 2: %+v, %d migrations; want one, with the amount in cents", run(i), st, migrated)
		case st.ConfirmedBy != "1" && st.ConfirmedBy != "2":
			t.Errorf("%s: confirmed by %q", run(i), st.ConfirmedBy)
		}
		completed := natstest.Read(t, js, names.EventStream(), names.Event("payout", run(i), protocol.EventCompleted))
		if len(completed) != 1 {
			t.Errorf("%s completed %d times", run(i), len(completed))
		}
		if rep, err := c.VerifyAudit(ctx, "payout", run(i)); err != nil || !rep.Intact {
			t.Errorf("%s's audit chain: %+v (%v)", run(i), rep, err)
		}
	}
	if st, err := js.Stream(ctx, names.DeadLetterStream()); err != nil || st.CachedInfo().State.Msgs != 0 {
		t.Errorf("dead letters: %v", err)
	}
}
