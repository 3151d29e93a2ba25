package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPGatewayCommandGatesAnUpstreamsToolsOverStdio runs `interlock mcp
// gateway` against `interlock serve` with the example gate rules, in front
// of a streamable HTTP MCP server, and calls its tool from an MCP client on
// the gateway's stdio: a small refund runs at once, a large one awaits a
// supervisor.
func TestMCPGatewayCommandGatesAnUpstreamsToolsOverStdio(t *testing.T) {
	url := serveForTest(t, "--gate-rules", "../../examples/gate/rules.yaml")
	shop := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v0"}, nil)
	type refund struct {
		OrderID string  `json:"orderId"`
		Amount  float64 `json:"amount"`
	}
	mcp.AddTool(shop, &mcp.Tool{Name: "issue_refund", Description: "Refund an order."}, func(_ context.Context, _ *mcp.CallToolRequest, in refund) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %g on %s", in.Amount, in.OrderID)}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return shop }, nil))
	t.Cleanup(hs.Close)
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(config, []byte("upstreams:\n  - name: shop\n    url: "+hs.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	saved := stdin
	stdin = inR
	t.Cleanup(func() { stdin = saved })
	// The wait bounds the large refund's; the small one must be allowed
	// within it also on a loaded machine.
	runMCP(t, outW, "gateway", "--config", config, "--nats-url", url, "--wait", "3s")
	t.Cleanup(func() { _ = inW.Close(); _ = outW.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-model", Version: "v0"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"orderId": "o-1", "amount": 20}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "refunded 20 on o-1" {
		t.Fatalf("small refund: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"orderId": "o-2", "amount": 900}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "awaits approval (callId mcp-") {
		t.Fatalf("large refund: %v %+v", err, res)
	}
}

func TestMCPGatewayCommandSaysWhatIsWrongWithItsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("upstreams:\n  - name: files\n    comand: npx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(missing, []byte("upstreams:\n  - name: files\n    command: no-such-mcp-server-anywhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{}, exitUsage, "needs --config FILE"},
		{[]string{"--config", filepath.Join(dir, "none.yaml")}, exitUsage, "no such file"},
		{[]string{"--config", bad}, exitUsage, "field comand not found"},
		{[]string{"--config", bad, "--http", "0.0.0.0:8765"}, exitUsage, "not a loopback address"},
		{[]string{"--config", missing}, exitUsage, "upstream files: command \"no-such-mcp-server-anywhere\": executable file not found"},
	} {
		err := Run(t.Context(), append([]string{"mcp", "gateway"}, tc.args...), io.Discard, io.Discard)
		if err == nil || codeOf(err) != tc.wantCode || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (exit %d), want exit %d and %q", tc.args, err, codeOf(err), tc.wantCode, tc.want)
		}
	}
}
