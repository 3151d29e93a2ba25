package bus_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

var update = flag.Bool("update", false, "rewrite deploy/interlock-auth.conf and its copies from bus.DeployAuthConfig")

// authCopies are the files that hold deploy/interlock-auth.conf, and the
// indentation of the copy in each ("" for the file itself).
var authCopies = []struct{ path, indent string }{
	{"../deploy/interlock-auth.conf", ""},
	{"../deploy/k8s/interlock.yaml", "    "},
	{"../deploy/helm/nats-values.yaml", "        "},
}

// TestDeployAuthConfigIsGenerated keeps deploy/interlock-auth.conf, and
// its copies in the Kubernetes manifest and the nats chart's values, what
// bus.DeployAuthConfig writes: the accounts, exports and permissions the
// code and its tests know. With -update it writes them.
func TestDeployAuthConfigIsGenerated(t *testing.T) {
	n, _ := wire.NewNames("")
	want := bus.DeployAuthConfig(n)
	for _, c := range authCopies {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		next := want
		if c.indent != "" {
			next = replaceBlock(t, got, c.indent, want)
		}
		if got == next {
			continue
		}
		if *update {
			if err := os.WriteFile(c.path, []byte(next), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is not what bus.DeployAuthConfig writes; run go test ./bus -run TestDeployAuthConfigIsGenerated -update", c.path)
	}
}

// replaceBlock replaces, in a YAML file, the block scalar after the line
// "interlock-auth.conf: |" (its lines indented by indent) with conf.
func replaceBlock(t *testing.T, file, indent, conf string) string {
	t.Helper()
	lines := strings.SplitAfter(file, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "interlock-auth.conf: |" {
			start = i + 1
			break
		}
	}
	if start < 0 {
		t.Fatal("no interlock-auth.conf block")
	}
	end := start
	for end < len(lines) && (strings.HasPrefix(lines[end], indent) || strings.TrimSpace(lines[end]) == "") {
		end++
	}
	// Keep the blank lines that end the block out of it.
	for end > start && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimRight(conf, "\n")+"\n", "\n") {
		if l == "" {
			continue
		}
		if strings.TrimSpace(l) == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(indent + l)
	}
	return strings.Join(lines[:start], "") + b.String() + strings.Join(lines[end:], "")
}
