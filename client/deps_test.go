package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientStandsAlone checks that a program built on the client carries
// neither a NATS server nor Interlock's engine, storage or workers: it
// depends on events, protocol, wire and nats.go alone.
func TestClientStandsAlone(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/interlockhq/interlock/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/interlockhq/interlock"
	allowed := map[string]bool{module + "/client": true, module + "/events": true, module + "/protocol": true, module + "/internal/jsonw": true, module + "/wire": true}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, dep := range deps {
		switch {
		case strings.HasPrefix(dep, "github.com/nats-io/nats-server"):
			t.Errorf("client depends on the NATS server (%s)", dep)
		case (dep == module || strings.HasPrefix(dep, module+"/")) && !allowed[dep]:
			t.Errorf("client depends on %s; it may use only events, protocol and wire of this module", dep)
		}
	}
}
