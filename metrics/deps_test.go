package metrics_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMetricsStandOnTheProtocol checks that the metrics room depends on
// bus, engine, events and wire of this module, never on the root service
// or another room.
func TestMetricsStandOnTheProtocol(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/interlockhq/interlock/metrics").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/interlockhq/interlock"
	allowed := map[string]bool{}
	for _, p := range []string{"metrics", "bus", "command", "engine", "authority", "events", "protocol", "internal/jsonw", "internal/netaddr", "wire"} {
		allowed[module+"/"+p] = true
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, dep := range deps {
		if (dep == module || strings.HasPrefix(dep, module+"/")) && !allowed[dep] {
			t.Errorf("metrics depends on %s; it may use only bus (and the command table bus uses), engine (and the authority it asks), events, protocol and wire of this module", dep)
		}
	}
}
