package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestVersionSaysTheModuleTheCommitGoAndTheNATSServer: what a build
// records (its module version, VCS commit, time and state, the Go that
// built it) is what `interlock version` says, with the nats-server it
// embeds; a build that recorded no commit says so and how to get one.
func TestVersionSaysTheModuleTheCommitGoAndTheNATSServer(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/interlockhq/interlock", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "038968f0e1d2c3b4a5968778695a4b3c2d1e0f9a"},
			{Key: "vcs.time", Value: "2026-11-20T10:11:12Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := versionOf(stamped).String()
	nats := "v" + server.VERSION
	for _, want := range []string{
		"interlock    v1.4.0\n",
		"commit       038968f0e1d2c3b4a5968778695a4b3c2d1e0f9a (2026-11-20T10:11:12Z), with uncommitted changes\n",
		"go           go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n",
		"nats-server  " + nats + " (embedded)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("version of a stamped build:\n%s\ndoes not say %q", got, want)
		}
	}
	unstamped := versionOf(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/interlockhq/interlock", Version: "(devel)"}}).String()
	if !strings.Contains(unstamped, "interlock    (devel)\n") || !strings.Contains(unstamped, "commit       unknown: the build recorded none (go build or go install in a git clone records it") {
		t.Errorf("version of a build without VCS information:\n%s", unstamped)
	}
	if v := versionOf(nil); v.Module != "(devel)" || v.Go != runtime.Version() || v.NATSServer != nats {
		t.Errorf("version of a binary without build information: %+v", v)
	}
}

// TestVersionAndTheVersionFlagPrintTheSame: `interlock version` and
// `interlock --version` print this binary's version on stdout and exit 0;
// --json prints the same for scripts.
func TestVersionAndTheVersionFlagPrintTheSame(t *testing.T) {
	t.Parallel()
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		if err := Run(t.Context(), args, &stdout, &stderr); err != nil || stderr.Len() != 0 {
			t.Fatalf("interlock %v: %v, stderr %q", args, err, stderr.String())
		}
		outs = append(outs, stdout.String())
	}
	if outs[0] != outs[1] || outs[0] != outs[2] {
		t.Errorf("version and --version differ:\n%s\n%s\n%s", outs[0], outs[1], outs[2])
	}
	for _, want := range []string{"interlock ", "commit ", "go           " + runtime.Version(), "nats-server  v" + server.VERSION} {
		if !strings.Contains(outs[0], want) {
			t.Errorf("interlock version:\n%s\ndoes not say %q", outs[0], want)
		}
	}
	var stdout bytes.Buffer
	if err := Run(t.Context(), []string{"version", "--json"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	var v version
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Go != runtime.Version() || v.NATSServer != "v"+server.VERSION || v.Module == "" {
		t.Errorf("version --json: %v\n%s", err, stdout.String())
	}
	if err := Run(t.Context(), []string{"version", "now"}, &stdout, &stdout); codeOf(err) != exitUsage {
		t.Errorf("version with an argument: exit %d (%v), want %d", codeOf(err), err, exitUsage)
	}
}
