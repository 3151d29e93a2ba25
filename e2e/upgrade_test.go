package e2e_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// previousBuild is a data dir the build before flow versions wrote
// (commit 9ef825e, with the example flows and gate rules, and the test
// secret), holding four runs that wait: a gate call, an ask, a refund's
// approval and a booking's question.
const previousBuild = "testdata/upgrade/previous.tar.gz"

// untar unpacks the gzipped tar file into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) && path != filepath.Clean(dir) {
			t.Fatalf("%s holds %s, outside the dir", file, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRunsThePreviousBuildLeftWaitingFinishWithThisOne: an upgrade of
// Interlock itself with work waiting. The data dir the previous build
// wrote is started with this build: each run still waits where it did,
// with its token, and is decided or answered to completion; every audit
// chain verifies across the two builds' records, and the checkpoints
// this build writes record the flows' versions.
func TestRunsThePreviousBuildLeftWaitingFinishWithThisOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	untar(t, previousBuild, dir)
	srv := natstest.StartServer(t, dir)
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	c := svc.Client("/test")
	waiting := map[string]protocol.Interrupted{}
	for _, r := range [][2]string{{protocol.GateFlow, "c-before"}, {protocol.AskFlow, "ask-before"}, {"refund", "r-before"}, {"booking", "b-before"}} {
		in, err := c.LastInterrupt(t.Context(), r[0], r[1])
		if err != nil {
			t.Fatalf("%s %s: %v, want it waiting as the previous build left it", r[0], r[1], err)
		}
		if in.ExpiresAt != nil && in.ExpiresAt.Before(time.Now().Add(time.Hour)) {
			t.Fatalf("%s %s's deadline %s is near or past: write %s again with deadlines further off (see its README)", r[0], r[1], in.ExpiresAt, previousBuild)
		}
		waiting[r[1]] = in
	}

	// Decided and answered with this build, as people would.
	for _, r := range [][2]string{{protocol.GateFlow, "c-before"}, {protocol.AskFlow, "ask-before"}, {"refund", "r-before"}} {
		in := waiting[r[1]]
		ev, err := svc.ResumeAs(t.Context(), c, r[0], r[1], protocol.Resume{RequestID: in.RequestID, Decision: "approve"}, "sam", []string{in.ApproverRole})
		if err != nil || ev.Kind == protocol.EventRefused {
			t.Fatalf("approving %s %s: %s %v %s", r[0], r[1], ev.Kind, err, ev.Event.Data())
		}
	}
	b := waiting["b-before"]
	ev, err := c.Resume(t.Context(), "booking", "b-before", protocol.Resume{ResumeToken: b.ResumeToken,
		Answers: map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.org"`)}})
	if err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("answering the booking with the token the previous build issued: %s %v %s", ev.Kind, err, ev.Event.Data())
	}

	versions := map[string]string{protocol.GateFlow: engine.GateFlow().Version(), protocol.AskFlow: engine.AskFlow().Version()}
	for _, f := range examples.Flows() {
		versions[f.Name()] = f.Version()
	}
	for _, r := range [][2]string{{protocol.GateFlow, "c-before"}, {protocol.AskFlow, "ask-before"}, {"refund", "r-before"}, {"booking", "b-before"}} {
		cp, err := c.Checkpoint(t.Context(), r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		if r[0] != "booking" && cp.Status != protocol.StatusCompleted {
			t.Errorf("%s %s is %s after its approval, want completed", r[0], r[1], cp.Status)
		}
		if r[0] == "booking" && cp.Status == protocol.StatusWaiting && cp.Interrupt.RequestID == b.RequestID {
			t.Errorf("the booking still waits on the question the previous build asked")
		}
		if cp.FlowVersion != versions[r[0]] {
			t.Errorf("%s %s's checkpoint records version %q, want this build's %q", r[0], r[1], cp.FlowVersion, versions[r[0]])
		}
		report, err := c.VerifyAudit(t.Context(), r[0], r[1])
		if err != nil || !report.Intact || report.Records < 2 {
			t.Errorf("%s %s's audit chain across the two builds: %+v (%v), want intact", r[0], r[1], report, err)
		}
	}
}
