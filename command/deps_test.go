package command_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheTableStandsApartFromAnyTransport checks that the verb table
// carries no transport: it depends on engine, events, authority and
// protocol of this module (and the leaf helpers they use, internal/jsonw
// and internal/netaddr, on the standard library alone), and on no NATS
// package, so that any transport may use it.
func TestTheTableStandsApartFromAnyTransport(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/interlockhq/interlock/command").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/interlockhq/interlock"
	allowed := map[string]bool{}
	for _, p := range []string{"command", "engine", "events", "authority", "protocol", "internal/jsonw", "internal/netaddr"} {
		allowed[module+"/"+p] = true
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "github.com/nats-io/"):
			t.Errorf("command depends on %s, a NATS package", dep)
		case (dep == module || strings.HasPrefix(dep, module+"/")) && !allowed[dep]:
			t.Errorf("command depends on %s; it may use only engine, events, authority and protocol of this module", dep)
		}
	}
}
