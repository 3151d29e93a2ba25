package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCall calls a tool and decodes its structured output into out.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, b)
	}
	if strings.Contains(strings.ToLower(string(b)), "resumetoken") {
		t.Fatalf("%s: the result names a resume token: %s", name, b)
	}
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// runMCP runs `interlock mcp` with args until the test ends.
func runMCP(t *testing.T, stdout io.Writer, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, append([]string{"mcp"}, args...), stdout, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("mcp returned %v, want a clean stop", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("mcp did not stop within 10 s")
		}
	})
}

// TestMCPCommandServesAModelOverStdio runs `interlock mcp` against
// `interlock serve`, with no secret, so that it keeps the tokens, and
// walks the first questions of a booking from an MCP client on its stdio.
func TestMCPCommandServesAModelOverStdio(t *testing.T) {
	url := serveForTest(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	saved := stdin
	stdin = inR
	t.Cleanup(func() { stdin = saved })
	runMCP(t, outW, "--nats-url", url)
	t.Cleanup(func() { _ = inW.Close(); _ = outW.Close() })

	c := mcp.NewClient(&mcp.Implementation{Name: "test-model", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	var flows struct{ Flows []struct{ Name string } }
	mcpCall(t, cs, "list_flows", map[string]any{}, &flows)
	if len(flows.Flows) != 2 || flows.Flows[0].Name != "booking" {
		t.Fatalf("flows %+v", flows)
	}
	var r struct {
		Run, Status string
		Interrupt   struct {
			Questions []struct{ Field, HiddenContext string }
		}
	}
	mcpCall(t, cs, "start_flow", map[string]any{"flow": "booking"}, &r)
	mcpCall(t, cs, "continue_flow", map[string]any{"flow": "booking", "run": r.Run, "stateUpdates": map[string]any{"email": "nope"}}, &r)
	if r.Status != "interrupt" || !strings.HasPrefix(r.Interrupt.Questions[0].HiddenContext, "ERROR:") {
		t.Fatalf("a rejected email: %+v", r)
	}
	mcpCall(t, cs, "continue_flow", map[string]any{"flow": "booking", "run": r.Run, "stateUpdates": map[string]any{"email": "ann@example.com"}}, &r)
	if r.Status != "interrupt" || len(r.Interrupt.Questions) != 2 || r.Interrupt.Questions[0].Field != "name" {
		t.Fatalf("after the email: %+v", r)
	}
}

// TestMCPCommandServesStreamableHTTP runs `interlock mcp --http` and
// starts a run from an MCP client over HTTP.
func TestMCPCommandServesStreamableHTTP(t *testing.T) {
	url := serveForTest(t)
	pr, pw := io.Pipe()
	runMCP(t, pw, "--nats-url", url, "--http", "127.0.0.1:0")
	t.Cleanup(func() { _ = pw.Close() })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, rest, _ := strings.Cut(line, " on ")
	endpoint := strings.TrimSuffix(strings.Fields(rest)[0], ".")
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") || !strings.HasSuffix(endpoint, "/mcp") {
		t.Fatalf("mcp --http printed %q", line)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-model", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	var r struct{ Run, Status string }
	mcpCall(t, cs, "start_flow", map[string]any{"flow": "booking", "stateUpdates": map[string]any{"email": "ann@example.com"}}, &r)
	if r.Status != "interrupt" || r.Run == "" {
		t.Fatalf("start_flow: %+v", r)
	}
}

func TestMCPCommandListensOnLoopbackUnlessToldItIsUnsafe(t *testing.T) {
	t.Parallel()
	err := Run(t.Context(), []string{"mcp", "--http", "0.0.0.0:8765"}, io.Discard, io.Discard)
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "--http-insecure-public") {
		t.Fatalf("mcp --http 0.0.0.0:8765: %v", err)
	}
	err = Run(t.Context(), []string{"mcp", "--http-insecure-public"}, io.Discard, io.Discard)
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "goes with --http") {
		t.Fatalf("mcp --http-insecure-public alone: %v", err)
	}
}

// interlock mcp names the person behind the MCP client as the command
// line names its user, not "mcp".
func TestTheMCPServerDecidesAsItsUserByDefault(t *testing.T) {
	t.Setenv("INTERLOCK_MCP_APPROVER", "")
	t.Setenv("INTERLOCK_AS", "dana")
	if got := defaultMCPApprover(); got != "dana" {
		t.Errorf("with INTERLOCK_AS=dana the approver is %q", got)
	}
	t.Setenv("INTERLOCK_MCP_APPROVER", "erin")
	if got := defaultMCPApprover(); got != "erin" {
		t.Errorf("with INTERLOCK_MCP_APPROVER=erin the approver is %q", got)
	}
	t.Setenv("INTERLOCK_MCP_APPROVER", "")
	t.Setenv("INTERLOCK_AS", "")
	if got, login := defaultMCPApprover(), loginName(); login != "" && got != login {
		t.Errorf("the approver is %q, want the login name %q", got, login)
	}
}
