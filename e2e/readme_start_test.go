//go:build unix

package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSection returns the README's section that begins with heading, up
// to the next section.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// TestReadmeSaysWhatTheFirstRunCostsAndHowToBuildOnce: the README's first
// command says what it costs on a fresh machine, and where a binary or an
// image comes from: built once, by commands that work (the image's is
// deploy/Dockerfile's own), since none is published.
func TestReadmeSaysWhatTheFirstRunCostsAndHowToBuildOnce(t *testing.T) {
	t.Parallel()
	section := readmeSection(t, "## The two commands")
	flat := strings.Join(strings.Fields(section), " ")
	for _, want := range []string{"go run ./cmd/interlock serve", "about two minutes", "800 MB", "No prebuilt binary or image is published"} {
		if !strings.Contains(flat, want) {
			t.Errorf("README's two commands do not say %q", want)
		}
	}
	for _, invented := range []string{"docker pull", "ghcr.io", "go install github.com/interlockhq"} {
		if strings.Contains(section, invented) {
			t.Errorf("README's two commands offer %q, which nothing publishes", invented)
		}
	}
	dockerfile, err := os.ReadFile("../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^# Build: (docker build .*)$`).FindSubmatch(dockerfile)
	if build == nil {
		t.Fatal("deploy/Dockerfile says no `# Build: docker build ...` command")
	}
	if !strings.Contains(flat, "`"+string(build[1])+"`") {
		t.Errorf("README does not build the image as deploy/Dockerfile says: %s", build[1])
	}

	goBuild := regexp.MustCompile("(?m)^go build -o (\\S+) (\\./cmd/interlock)$").FindStringSubmatch(section)
	if goBuild == nil {
		t.Fatal("README's two commands have no `go build -o interlock ./cmd/interlock` line")
	}
	if !strings.Contains(section, "`./"+goBuild[1]+" serve`") {
		t.Errorf("README builds %s but does not say to run ./%s serve", goBuild[1], goBuild[1])
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), goBuild[1])
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, goBuild[2])
	cmd.Dir = ".." // the README's commands run at the repository root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README: go build -o %s %s: %v\n%s", goBuild[1], goBuild[2], err, out)
	}
	if out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "interlock ") {
		t.Fatalf("the binary the README builds: interlock version: %v\n%s", err, out)
	}
}

// TestReadmeAndCISayTheRaceDetectorNeedsACCompiler: the README's test
// command says -race needs cgo and a C compiler, what to install and what
// runs without one; .ci/run checks for a C compiler and for cgo, saying
// what to install, before it runs go test -race.
func TestReadmeAndCISayTheRaceDetectorNeedsACCompiler(t *testing.T) {
	t.Parallel()
	section := readmeSection(t, "## The two commands")
	_, after, ok := strings.Cut(section, "go test -race ./...\n```\n")
	if !ok {
		t.Fatal("README's two commands have no `go test -race ./...` block")
	}
	after = strings.Join(strings.Fields(after), " ")
	for _, want := range []string{"needs cgo", "C compiler", "apt-get install gcc libc6-dev", "`go test ./...`"} {
		if !strings.Contains(after, want) {
			t.Errorf("README's note on go test -race does not say %q", want)
		}
	}

	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	script := string(ci)
	race := strings.Index(script, "\ngo test -race ")
	if race < 0 {
		t.Fatal(".ci/run does not run go test -race")
	}
	for _, check := range []string{"command -v gcc", "command -v cc", `missing="$missing gcc libc6-dev"`, `"$(go env CGO_ENABLED)" != 1`, "apt-get install gcc libc6-dev"} {
		if i := strings.Index(script, check); i < 0 || i > race {
			t.Errorf(".ci/run does not %q before go test -race", check)
		}
	}
}
