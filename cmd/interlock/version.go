package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
)

// version is what a binary of interlock is made of.
type version struct {
	// Module is the module's version: a release tag, a pseudo-version, or
	// (devel) for a build of a checkout that is neither.
	Module string `json:"version"`
	// Commit is the VCS revision built, "" when the build did not record
	// it; CommitTime is its time, Modified whether the checkout had
	// uncommitted changes.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	// Go is the Go version that built the binary; Platform its GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// NATSServer is the version of the nats-server embedded.
	NATSServer string `json:"natsServer"`
}

// versionOf reads a binary's version from its build information (nil
// when the binary has none).
func versionOf(bi *debug.BuildInfo) version {
	v := version{Module: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, NATSServer: "v" + server.VERSION}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Module = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the version as `interlock version` prints it.
func (v version) String() string {
	commit := "unknown: the build recorded none (go build or go install in a git clone records it; go run, go test, a git worktree and -buildvcs=false do not)"
	if v.Commit != "" {
		commit = v.Commit
		if v.CommitTime != "" {
			commit += " (" + v.CommitTime + ")"
		}
		if v.Modified {
			commit += ", with uncommitted changes"
		}
	}
	return fmt.Sprintf("interlock    %s\ncommit       %s\ngo           %s %s\nnats-server  %s (embedded)\n", v.Module, commit, v.Go, v.Platform, v.NATSServer)
}

// versionCmd runs `interlock version` and `interlock --version`.
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version [--json]", stderr)
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) > 0 {
		return usageOf("version", "version takes no arguments, but was given %s", quoteAll(pos))
	}
	bi, _ := debug.ReadBuildInfo()
	v := versionOf(bi)
	if !*asJSON {
		_, err := fmt.Fprint(stdout, v)
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
