package mcpserver_test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpserver"
	"github.com/interlockhq/interlock/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flows is what the tests' servers offer.
var flows = []mcpserver.Flow{
	{Name: "booking", Description: "books a course"},
	{Name: "refund", Description: "refunds an order"},
}

// model is an MCP client session on an MCP server on a service of the
// example flows (and the example gate rules), on an embedded NATS server.
// It keeps every tool result, and checks at cleanup that none holds a
// resume token.
type model struct {
	t      testing.TB
	svc    *interlock.Service
	server *mcpserver.Server
	cs     *mcp.ClientSession

	mu      sync.Mutex
	results []string
}

// connect starts a service and an MCP server on it with cfg, and connects
// a client to it over the SDK's in-memory transport.
func connect(t testing.TB, cfg mcpserver.Config) *model {
	t.Helper()
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	return connectWith(t, cfg, rules)
}

// connectWith is connect on a service with the gate rules given, the gate
// off when nil.
func connectWith(t testing.TB, cfg mcpserver.Config, rules *gate.RuleSet) *model {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	s, err := mcpserver.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return session(t, svc, s)
}

// another connects another session to the same MCP server.
func (m *model) another() *model { return session(m.t, m.svc, m.server) }

// session connects an MCP client session to s over the SDK's in-memory
// transport.
func session(t testing.TB, svc *interlock.Service, s *mcpserver.Server) *model {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-model", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{t: t, svc: svc, server: s, cs: cs}
	t.Cleanup(func() {
		m.checkNoTokens()
		_ = cs.Close()
		_ = ss.Wait()
	})
	return m
}

// call calls a tool and decodes its structured output into out. It fails
// the test when the tool returns an error.
func (m *model) call(name string, args, out any) {
	m.t.Helper()
	res := m.callTool(name, args)
	reflect.ValueOf(out).Elem().SetZero()
	if res.IsError {
		m.t.Fatalf("%s(%s): tool error: %s", name, mustJSON(m.t, args), text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		m.t.Fatalf("%s: decoding %s: %v", name, b, err)
	}
}

// fail calls a tool that must return a tool error, and returns its text.
func (m *model) fail(name string, args any) string {
	m.t.Helper()
	res := m.callTool(name, args)
	if !res.IsError {
		m.t.Fatalf("%s(%s) = %s; want a tool error", name, mustJSON(m.t, args), mustJSON(m.t, res.StructuredContent))
	}
	return text(res)
}

func (m *model) callTool(name string, args any) *mcp.CallToolResult {
	m.t.Helper()
	res, err := m.cs.CallTool(m.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.results = append(m.results, name+": "+string(b))
	m.mu.Unlock()
	return res
}

// tokenShape is a resume token: 43 characters of unpadded base64url.
var (
	tokenShape = regexp.MustCompile(`(^|[^A-Za-z0-9_-])[A-Za-z0-9_-]{43}([^A-Za-z0-9_-]|$)`)
	tokenKey   = regexp.MustCompile(`(?i)resume_?token\\?"\s*:\s*\\?"[^"\\]`)
)

// checkNoTokens checks that no tool result holds a resume token: not one
// of those Interlock published, nothing shaped like one, and no
// resumeToken with a value.
func (m *model) checkNoTokens() {
	m.t.Helper()
	tokens := m.publishedTokens()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, res := range m.results {
		for _, tok := range tokens {
			if tok != "" && strings.Contains(res, tok) {
				m.t.Errorf("a tool result holds a resume token: %s", res)
			}
		}
		if tokenShape.MatchString(res) || tokenKey.MatchString(res) {
			m.t.Errorf("a tool result holds something like a resume token: %s", res)
		}
	}
}

// publishedTokens reads the resume token of every interrupted event in
// the events stream. It runs at cleanup, when the test's context is done.
func (m *model) publishedTokens() []string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Wait)
	defer cancel()
	stream, err := m.svc.JetStream().Stream(ctx, m.svc.Names().EventStream())
	if err != nil {
		m.t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	var tokens []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil || !strings.HasSuffix(msg.Subject, "."+protocol.EventInterrupted) {
			continue
		}
		ev, err := events.Decode(msg.Header, msg.Data)
		if err != nil {
			m.t.Fatal(err)
		}
		var in protocol.Interrupted
		if err := json.Unmarshal(ev.Data(), &in); err != nil {
			m.t.Fatal(err)
		}
		tokens = append(tokens, in.ResumeToken)
	}
	if len(tokens) == 0 && len(m.results) > 3 {
		m.t.Error("no interrupted event found: the token check checks nothing")
	}
	return tokens
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// args builds a tool's arguments.
type args = map[string]any

func wantStatus(t testing.TB, got mcpserver.RunResult, status string) {
	t.Helper()
	if got.Status != status {
		t.Fatalf("status %q, want %q: %+v", got.Status, status, got)
	}
}

func wantFields(t testing.TB, got mcpserver.RunResult, fields ...string) {
	t.Helper()
	wantStatus(t, got, mcpserver.StatusInterrupt)
	var have []string
	for _, q := range got.Interrupt.Questions {
		have = append(have, q.Field)
	}
	if strings.Join(have, ",") != strings.Join(fields, ",") {
		t.Fatalf("questions about %v, want %v: %+v", have, fields, got.Interrupt)
	}
}

func TestListFlowsOffersTheConfiguredFlows(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var out mcpserver.ListFlowsOutput
	m.call("list_flows", args{}, &out)
	if len(out.Flows) != 2 || out.Flows[0].Name != "booking" || out.Flows[1].Name != "refund" {
		t.Fatalf("flows %+v", out.Flows)
	}
}

func TestEveryToolHasDescribedInputAndOutputSchemas(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	res, err := m.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"list_flows", "start_flow", "continue_flow", "get_run", "list_pending", "request_tool_approval", "get_decision"}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, input and output schemas wanted: %+v", tool.Name, tool)
		}
		for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
			checkDescribed(t, tool.Name, schema)
		}
		if strings.Contains(strings.ToLower(mustJSON(t, tool)), "resumetoken") {
			t.Errorf("%s mentions a resume token: %s", tool.Name, mustJSON(t, tool))
		}
	}
	for _, tool := range res.Tools {
		if tool.Name != "continue_flow" {
			continue
		}
		props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		if got := mustJSON(t, props["decision"].(map[string]any)["enum"]); got != `["approve","edit","reject","respond"]` {
			t.Errorf("continue_flow's decision enumerates %s", got)
		}
	}
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			t.Errorf("no tool %s among %v", w, names)
		}
	}
}

// checkDescribed checks that every property of a schema, at any depth,
// has a description.
func checkDescribed(t testing.TB, tool string, schema any) {
	t.Helper()
	obj, _ := schema.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		if d, _ := ps["description"].(string); d == "" {
			t.Errorf("%s: property %s has no description", tool, name)
		}
		checkDescribed(t, tool, ps)
		if items, ok := ps["items"]; ok {
			checkDescribed(t, tool, items)
		}
	}
	for _, def := range []string{"$defs", "definitions"} {
		if defs, ok := obj[def].(map[string]any); ok {
			for _, d := range defs {
				checkDescribed(t, tool, d)
			}
		}
	}
}

// TestABookingConversationRunsThroughMCP drives the booking flow as a
// model would: start, a rejected email asked again with ERROR: in the
// hidden context, the contact questions, a level among suggestions,
// nested driver fields, and a multiple choice, to completion.
func TestABookingConversationRunsThroughMCP(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		name := "vouched"
		if keep {
			name = "tokens kept by the server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := connect(t, mcpserver.Config{Flows: flows, KeepTokens: keep})
			bookingConversation(t, m)
		})
	}
}

func bookingConversation(t *testing.T, m *model) {
	var r mcpserver.RunResult
	m.call("start_flow", args{"flow": "booking"}, &r)
	wantFields(t, r, "email")
	if r.Run == "" || r.Interrupt.RequestID == "" || r.Next == "" {
		t.Fatalf("start_flow gave %+v", r)
	}
	if got := r.Interrupt.Questions[0].HiddenContext; got != "Politely reject generic domains like gmail.com." {
		t.Fatalf("hidden context %q", got)
	}
	run := r.Run

	m.call("continue_flow", args{"flow": "booking", "run": run, "stateUpdates": args{"email": "not an email"}}, &r)
	wantFields(t, r, "email")
	if got := r.Interrupt.Questions[0].HiddenContext; !strings.HasPrefix(got, "ERROR: That doesn't look like an email.") {
		t.Fatalf("after a rejected email, hidden context %q; want ERROR: first", got)
	}

	m.call("continue_flow", args{"flow": "booking", "run": run, "requestId": r.Interrupt.RequestID, "stateUpdates": args{"email": " Ann@Example.com "}}, &r)
	wantFields(t, r, "name", "phone")
	if r.Interrupt.HiddenContext != "Ask both in one natural message." {
		t.Fatalf("interrupt-wide hidden context %q", r.Interrupt.HiddenContext)
	}

	m.call("continue_flow", args{"flow": "booking", "run": run, "stateUpdates": args{"name": "Ann", "phone": "+1 555 0100"}}, &r)
	wantFields(t, r, "level")
	if got := strings.Join(r.Interrupt.Questions[0].Suggestions, ","); got != "beginner,intermediate,advanced" {
		t.Fatalf("suggestions %q", got)
	}

	m.call("continue_flow", args{"flow": "booking", "run": run, "stateUpdates": args{"level": "Intermediate"}}, &r)
	wantFields(t, r, "driver.name", "driver.license")

	m.call("continue_flow", args{"flow": "booking", "run": run, "stateUpdates": args{"driver.name": "Bob", "driver.license": "D-123"}}, &r)
	wantStatus(t, r, mcpserver.StatusInterrupt)
	if r.Interrupt.Kind != "choice" || !r.Interrupt.Multiple || len(r.Interrupt.Options) != 3 {
		t.Fatalf("want the multiple choice of topics: %+v", r.Interrupt)
	}

	var info mcpserver.RunInfo
	m.call("get_run", args{"flow": "booking", "run": run}, &info)
	if info.Status != mcpserver.StatusInterrupt || info.Interrupt == nil || info.Interrupt.Kind != "choice" || info.State["email"] != "ann@example.com" {
		t.Fatalf("get_run gave %+v", info)
	}

	m.call("continue_flow", args{"flow": "booking", "run": run, "selected": []string{"product", "design"}}, &r)
	wantStatus(t, r, mcpserver.StatusCompleted)
	if r.State["email"] != "ann@example.com" || r.State["level"] != "intermediate" || mustJSON(t, r.State["topics"]) != `["product","design"]` {
		t.Fatalf("final state %+v", r.State)
	}
	if d, _ := r.State["driver"].(map[string]any); d["name"] != "Bob" {
		t.Fatalf("final state %+v", r.State)
	}
}

// TestStartStateSkipsTheQuestionsItAnswers gives the email at start.
func TestStartStateSkipsTheQuestionsItAnswers(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var r mcpserver.RunResult
	m.call("start_flow", args{"flow": "booking", "run": "r-skip", "stateUpdates": args{"email": "ann@example.com", "name": "Ann"}}, &r)
	wantFields(t, r, "phone")
	if r.Run != "r-skip" {
		t.Fatalf("run %q", r.Run)
	}
}

// TestAnApprovalIsDecidedThroughContinueFlow runs a refund whose approval
// the MCP server decides for the supervisor role it holds.
func TestAnApprovalIsDecidedThroughContinueFlow(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		name := "vouched"
		if keep {
			name = "tokens kept by the server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := connect(t, mcpserver.Config{Flows: flows, KeepTokens: keep, Approver: "ann", Roles: []string{"supervisor"}})
			var r mcpserver.RunResult
			m.call("start_flow", args{"flow": "refund", "stateUpdates": args{"orderId": "o-1", "amount": 4800, "currency": "USD"}}, &r)
			wantFields(t, r, "last4")
			m.call("continue_flow", args{"flow": "refund", "run": r.Run, "stateUpdates": args{"last4": "1234"}}, &r)
			wantStatus(t, r, mcpserver.StatusInterrupt)
			in := r.Interrupt
			if in.Kind != "approval" || in.Action != "issue_refund" || in.ApproverRole != "supervisor" || in.Args["amount"] != 4800.0 {
				t.Fatalf("want the supervisor's approval of the refund: %+v", in)
			}
			msg := m.fail("continue_flow", args{"flow": "refund", "run": r.Run, "decision": "edit", "edits": args{"amount": 9000}})
			if !strings.Contains(msg, "invalid_answer") || !strings.Contains(msg, "/amount: must be <= 4800") {
				t.Fatalf("an edit the args schema refuses: %s", msg)
			}
			m.call("continue_flow", args{"flow": "refund", "run": r.Run, "decision": "edit", "edits": args{"amount": 400}, "reason": "partial"}, &r)
			wantStatus(t, r, mcpserver.StatusCompleted)
			refund, _ := r.State["refund"].(map[string]any)
			if refund["amount"] != 400.0 || refund["approvedBy"] != "ann" {
				t.Fatalf("final state %+v", r.State)
			}
		})
	}
}

// TestAnApprovalForARoleTheServerLacksIsLeftToAPerson checks that the
// model cannot decide an approval for a role the server does not hold.
func TestAnApprovalForARoleTheServerLacksIsLeftToAPerson(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var r mcpserver.RunResult
	m.call("start_flow", args{"flow": "refund", "stateUpdates": args{"orderId": "o-1", "amount": 4800, "last4": "1234"}}, &r)
	wantStatus(t, r, mcpserver.StatusInterrupt)
	if !strings.Contains(r.Next, "supervisor role must decide") {
		t.Fatalf("next %q", r.Next)
	}
	msg := m.fail("continue_flow", args{"flow": "refund", "run": r.Run, "decision": "approve"})
	if !strings.Contains(msg, "supervisor role") || !strings.Contains(msg, "--role supervisor") {
		t.Fatalf("error %q", msg)
	}
}

// TestAGatedRefundWaitsForAPersonsDecision asks the tool-call gate through
// MCP: a small refund is allowed at once, a large one is pending until a
// supervisor decides through the service, and get_decision then says so.
func TestAGatedRefundWaitsForAPersonsDecision(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var d mcpserver.ToolDecision
	m.call("request_tool_approval", args{"tool": "issue_refund", "args": args{"orderId": "o-1", "amount": 20}}, &d)
	if d.Decision != mcpserver.DecisionAllowed || d.CallID == "" {
		t.Fatalf("a small refund: %+v", d)
	}

	m.call("request_tool_approval", args{"tool": "issue_refund", "callId": "call-big", "args": args{"orderId": "o-2", "amount": 4800}}, &d)
	if d.Decision != mcpserver.DecisionPending || d.Interrupt == nil || d.Interrupt.ApproverRole != "supervisor" || d.Interrupt.Args["amount"] != 4800.0 {
		t.Fatalf("a large refund: %+v", d)
	}
	m.call("get_decision", args{"callId": "call-big"}, &d)
	if d.Decision != mcpserver.DecisionPending {
		t.Fatalf("before anyone decides: %+v", d)
	}
	m.call("request_tool_approval", args{"tool": "issue_refund", "callId": "call-big", "args": args{"orderId": "o-2", "amount": 4800}}, &d)
	if d.Decision != mcpserver.DecisionPending {
		t.Fatalf("asked again while waiting: %+v", d)
	}
	if msg := m.fail("continue_flow", args{"flow": "gate", "run": "call-big", "decision": "approve"}); !strings.Contains(msg, "decided by people") {
		t.Fatalf("the model deciding its own call: %s", msg)
	}

	c := m.svc.Client("/test/supervisor")
	ev, err := m.svc.ResumeAs(t.Context(), c, "gate", "call-big", protocol.Resume{Decision: "reject", Reason: "needs a manager"}, "sue", []string{"supervisor"})
	if err != nil || ev.Kind != protocol.EventCompleted {
		t.Fatalf("deciding: %v %+v", err, ev)
	}
	m.call("get_decision", args{"callId": "call-big"}, &d)
	if d.Decision != mcpserver.DecisionRejected || d.Approver != "sue" || d.Reason != "needs a manager" || d.Rule != "large-refund" {
		t.Fatalf("after the decision: %+v", d)
	}
}

// TestBadInputSaysWhatWasWrongAndHowToFixIt checks the tool errors a model
// gets for mistakes.
func TestBadInputSaysWhatWasWrongAndHowToFixIt(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var done mcpserver.RunResult
	m.call("start_flow", args{"flow": "booking", "stateUpdates": args{
		"email": "a@b.c", "name": "A", "phone": "1", "level": "beginner", "driver": args{"name": "B", "license": "L"},
	}}, &done)
	wantStatus(t, done, mcpserver.StatusInterrupt)
	m.call("continue_flow", args{"flow": "booking", "run": done.Run, "selected": []string{"product"}}, &done)
	wantStatus(t, done, mcpserver.StatusCompleted)
	var waiting mcpserver.RunResult
	m.call("start_flow", args{"flow": "booking"}, &waiting)

	for _, tc := range []struct {
		name, tool string
		args       args
		want       []string
	}{
		{"unknown flow", "start_flow", args{"flow": "bookings"}, []string{"unknown_flow", "known flows:", "booking, refund", "list_flows"}},
		{"bad run name", "start_flow", args{"flow": "booking", "run": "r 1"}, []string{`run name "r 1"`, "byte 1", "A-Z a-z 0-9 _ -"}},
		{"run taken", "start_flow", args{"flow": "booking", "run": done.Run}, []string{"run_exists", "another run id"}},
		{"continue a finished run", "continue_flow", args{"flow": "booking", "run": done.Run, "stateUpdates": args{"email": "x@y.z"}}, []string{"completed, not waiting", "start_flow"}},
		{"continue no such run", "continue_flow", args{"flow": "booking", "run": "r-none", "stateUpdates": args{"email": "x@y.z"}}, []string{"no run r-none", "list_pending"}},
		{"answer a field not asked", "continue_flow", args{"flow": "booking", "run": waiting.Run, "stateUpdates": args{"phone": "1"}}, []string{`"phone" is not asked`, "email", "stateUpdates", "continue_flow again"}},
		{"answer that does not fit the state", "continue_flow", args{"flow": "booking", "run": waiting.Run, "stateUpdates": args{"email": 5}}, []string{"invalid_answer", "does not fit", "continue_flow again"}},
		{"select for a question", "continue_flow", args{"flow": "booking", "run": waiting.Run, "selected": []string{"x"}}, []string{"waits on a question", "stateUpdates"}},
		{"old request", "continue_flow", args{"flow": "booking", "run": waiting.Run, "requestId": "rq_OLD", "stateUpdates": args{"email": "a@b.c"}}, []string{"no longer waits on request rq_OLD", "get_run"}},
		{"get no such run", "get_run", args{"flow": "nope", "run": "r-1"}, []string{"no run of a flow named nope"}},
		{"page too large", "list_pending", args{"limit": 5000}, []string{"limit 5000", "1 to 100"}},
		{"no tool", "request_tool_approval", args{"tool": ""}, []string{"tool is missing"}},
		{"no such call", "get_decision", args{"callId": "call-none"}, []string{"no tool call call-none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := m.fail(tc.tool, tc.args)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error %q does not say %q", tc.tool, msg, w)
				}
			}
		})
	}
}

// TestListPendingPages lists waiting runs a page at a time.
func TestListPendingPages(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	var r mcpserver.RunResult
	for range 3 {
		m.call("start_flow", args{"flow": "booking"}, &r)
	}
	m.call("start_flow", args{"flow": "refund", "stateUpdates": args{"orderId": "o-1", "amount": 4800, "last4": "1234"}}, &r)
	var page mcpserver.PendingOutput
	m.call("list_pending", args{"flow": "booking", "limit": 2}, &page)
	if len(page.Items) != 2 || page.Next == "" || page.Items[0].Kind != "question" || page.Items[0].Fields[0] != "email" {
		t.Fatalf("first page %+v", page)
	}
	m.call("list_pending", args{"flow": "booking", "limit": 2, "cursor": page.Next}, &page)
	if len(page.Items) != 1 || page.Next != "" {
		t.Fatalf("second page %+v", page)
	}
	m.call("list_pending", args{"kind": "approval"}, &page)
	if len(page.Items) != 1 || page.Items[0].Action != "issue_refund" || page.Items[0].ApproverRole != "supervisor" {
		t.Fatalf("approvals %+v", page)
	}
}

// TestKeptTokensAreBoundToTheSession checks that without the secret a
// session answers only the interrupts it has seen.
func TestKeptTokensAreBoundToTheSession(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows, KeepTokens: true})
	other := m.another()
	var r mcpserver.RunResult
	m.call("start_flow", args{"flow": "booking"}, &r)
	msg := other.fail("continue_flow", args{"flow": "booking", "run": r.Run, "stateUpdates": args{"email": "a@b.c"}})
	if !strings.Contains(msg, "has not seen run "+r.Run) {
		t.Fatalf("another session's answer: %s", msg)
	}
	m.call("continue_flow", args{"flow": "booking", "run": r.Run, "stateUpdates": args{"email": "a@b.c"}}, &r)
	wantFields(t, r, "name", "phone")
}

// TestAGateThatIsOffSaysSoAtOnce: a deployment without gate rules refuses
// request_tool_approval at once, saying the gate is off and not to call
// the tool, and get_decision says the same rather than that there is no
// such call: an agent is never told to poll for a decision that will not
// come.
func TestAGateThatIsOffSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	m := connectWith(t, mcpserver.Config{Flows: flows}, nil)
	msg := m.fail("request_tool_approval", args{"tool": "issue_refund", "callId": "call-off", "args": args{"amount": 20}})
	for _, want := range []string{"unsupported", "gate is off", "--gate-rules", "do not call the tool"} {
		if !strings.Contains(msg, want) {
			t.Errorf("request_tool_approval with the gate off: %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "queued") || strings.Contains(msg, "later") {
		t.Errorf("request_tool_approval with the gate off tells the model to wait: %q", msg)
	}
	msg = m.fail("get_decision", args{"callId": "call-off"})
	if !strings.Contains(msg, "gate is off") || strings.Contains(msg, "no tool call") {
		t.Errorf("get_decision of a call refused because the gate is off: %q", msg)
	}
}

func TestCheckAddrAllowsOnlyLoopbackUnlessPublic(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		addr    string
		public  bool
		wantErr string
	}{
		{addr: "127.0.0.1:8765"},
		{addr: "[::1]:8765"},
		{addr: "LOCALHOST.:8765"},
		{addr: "0.0.0.0:8765", wantErr: "not a loopback address"},
		{addr: ":8765", wantErr: "not a loopback address"},
		{addr: "app.localhost:8765", wantErr: "not a loopback address"},
		{addr: "0.0.0.0:8765", public: true},
		{addr: "nowhere", wantErr: "use host:port"},
	} {
		err := mcpserver.CheckAddr(tt.addr, tt.public)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckAddr(%q, %t) = %v", tt.addr, tt.public, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckAddr(%q, %t) = %v, want an error saying %q", tt.addr, tt.public, err, tt.wantErr)
		}
	}
}
