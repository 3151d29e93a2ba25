package mcpgateway_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/mcpgateway"
)

func TestParseConfigSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, wantErr string
	}{
		{"empty", "", "is empty: list the MCP servers"},
		{"no upstreams", "wait: 10s\n", "no upstreams"},
		{"unknown field", "upstreams:\n  - name: a\n    comand: x\n", "field comand not found"},
		{"no command nor url", "upstreams:\n  - name: a\n", "upstreams[0] (a): give a command"},
		{"both", "upstreams:\n  - name: a\n    command: x\n    url: http://h/mcp\n", "not both"},
		{"bad name", "upstreams:\n  - name: a b\n    command: x\n", `name "a b"`},
		{"separator in name", "upstreams:\n  - name: a__b\n    command: x\n", "joins the upstream's name"},
		{"same name", "upstreams:\n  - {name: a, command: x}\n  - {name: a, command: y}\n", "another upstream is named a"},
		{"bad url", "upstreams:\n  - name: a\n    url: ftp://h\n", "not an http or https URL"},
		{"args with url", "upstreams:\n  - name: a\n    url: http://h/mcp\n    args: [x]\n", "not with a url"},
		{"bad prefix", "upstreams:\n  - name: a\n    command: x\n    prefix: sometimes\n", `prefix "sometimes"`},
		{"bad wait", "wait: soon\nupstreams:\n  - {name: a, command: x}\n", `wait "soon" is not a positive duration`},
		{"good", "agent: support-bot\nwait: 45s\nrepeatWindow: 1h\nupstreams:\n  - name: files\n    command: npx\n    args: [-y, server]\n    env: {ROOT: /srv}\n  - name: billing\n    url: http://127.0.0.1:9000/mcp\n    prefix: always\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mcpgateway.ParseConfig([]byte(tc.yaml), "gateway.yaml")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Wait != 45*time.Second || cfg.RepeatWindow != time.Hour || cfg.Agent != "support-bot" || len(cfg.Upstreams) != 2 || cfg.Upstreams[0].Env["ROOT"] != "/srv" || cfg.Upstreams[1].Prefix != "always" {
					t.Errorf("config %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "gateway.yaml") {
				t.Errorf("error %v, want one naming gateway.yaml that says %q", err, tc.wantErr)
			}
		})
	}
}

// TestTheExampleConfigAndRulesParse keeps examples/mcp-gateway valid.
func TestTheExampleConfigAndRulesParse(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../examples/mcp-gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpgateway.ParseConfig(data, "gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Installed once and run by its command: npx -y looks the package up
	// on every start, longer than many MCP clients wait for a server.
	if len(cfg.Upstreams) != 1 || cfg.Upstreams[0].Command != "mcp-server-filesystem" || slices.Contains(cfg.Upstreams[0].Args, "-y") {
		t.Errorf("config %+v, want the installed mcp-server-filesystem, not npx -y", cfg)
	}
	rules, err := os.ReadFile("../examples/mcp-gateway/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gate.Parse(rules, "rules.yaml"); err != nil {
		t.Fatal(err)
	}
}
