package mcpgateway_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpgateway"
	"github.com/interlockhq/interlock/protocol"
)

// taskClient connects an MCP client named name to gw that takes task
// handles (it names the tasks extension in its capabilities) and can send
// tasks/get, tasks/update and tasks/cancel.
func taskClient(t *testing.T, gw *mcpgateway.Gateway, name string) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(mcpgateway.TasksExtension, map[string]any{})
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v0"}, &mcp.ClientOptions{Capabilities: caps})
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if err := mcp.AddSendingCustomMethod[*mcpgateway.TaskParams, *mcpgateway.Task](c, m); err != nil {
			t.Fatal(err)
		}
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// taskOf is the task id a tools/call returned instead of a result.
func taskOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	rel, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	id, _ := rel["taskId"].(string)
	if id == "" || len(res.Content) != 0 {
		t.Fatalf("want a task handle, got %s (isError %v, _meta %v)", text(res), res.IsError, res.Meta)
	}
	return id
}

// taskCall sends tasks/get (or another task method) for id.
func taskCall(t *testing.T, cs *mcp.ClientSession, method, id string) (*mcpgateway.Task, error) {
	t.Helper()
	return mcp.CallCustomMethod[*mcpgateway.TaskParams, *mcpgateway.Task](t.Context(), cs, method, &mcpgateway.TaskParams{TaskID: id})
}

// getTask polls task id once.
func getTask(t *testing.T, cs *mcp.ClientSession, id string) *mcpgateway.Task {
	t.Helper()
	task, err := taskCall(t, cs, "tasks/get", id)
	if err != nil {
		t.Fatalf("tasks/get %s: %v", id, err)
	}
	if task.TaskID != id || task.ResultType != "complete" || task.PollIntervalMs != mcpgateway.TaskPollInterval.Milliseconds() {
		t.Fatalf("tasks/get %s: %+v", id, task)
	}
	return task
}

// completed polls task id until it is completed, and returns its result.
func completed(t *testing.T, cs *mcp.ClientSession, id string) *mcp.CallToolResult {
	t.Helper()
	var task *mcpgateway.Task
	natstest.Eventually(t, "task "+id+" completed", func() bool {
		task = getTask(t, cs, id)
		return task.Status != mcpgateway.TaskWorking
	})
	if task.Status != mcpgateway.TaskCompleted || task.Result == nil {
		t.Fatalf("task %s: status %s, result %v, want completed with a result", id, task.Status, task.Result)
	}
	return task.Result
}

func TestGatewayReturnsATaskForACallThatWaitsAndRunsItOnceWhenApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{Wait: natstest.Wait}, "claude-desktop")
	cs := taskClient(t, gw, "claude-desktop")
	// The call returns a task at once, although the gateway would wait
	// up to a minute for a client that takes no tasks.
	id := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-t1", "amount": 900}))
	if w := e.waitingCall(); w != id {
		t.Fatalf("task %s, but the call waiting is %s", id, w)
	}
	task := getTask(t, cs, id)
	if task.Status != mcpgateway.TaskWorking || !strings.Contains(task.StatusMessage, "supervisor") || !strings.Contains(task.StatusMessage, "over $500") ||
		task.TTLMs == nil || *task.TTLMs < time.Hour.Milliseconds() || task.Result != nil {
		t.Fatalf("waiting task: %+v", task)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Fatalf("the upstream ran %v before anyone approved", got)
	}
	e.decide(id, protocol.Resume{Decision: "approve", Reason: "checked the ticket"})
	// Polls at once after the decision: the call runs once, and every
	// poll gets its result.
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, 4)
	for i := range results {
		wg.Go(func() { results[i] = completed(t, cs, id) })
	}
	wg.Wait()
	for _, res := range append(results, completed(t, cs, id)) {
		if res.IsError || text(res) != "refunded 900 on o-t1" {
			t.Fatalf("approved task: %s (isError %v), want the upstream's result", text(res), res.IsError)
		}
		if g := gateOf(t, res); g.Decision != "approved" || g.Approver != "sue" || g.CallID != id {
			t.Errorf("gate %+v", g)
		}
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-t1 900"}) {
		t.Errorf("upstream got %v, want the call once", got)
	}
}

func TestGatewaysTaskCarriesEditsRejectionsAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	cs := taskClient(t, gw, "claude-desktop")

	edited := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-t2", "amount": 900}))
	e.decide(edited, protocol.Resume{Decision: "edit", Edits: map[string]json.RawMessage{"amount": json.RawMessage("400")}, Reason: "partial"})
	if res := completed(t, cs, edited); res.IsError || text(res) != "refunded 400 on o-t2" {
		t.Errorf("edited task: %s (isError %v), want the result for the edited args", text(res), res.IsError)
	}

	rejected := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-t3", "amount": 900}))
	e.decide(rejected, protocol.Resume{Decision: "reject", Reason: "the customer already got a voucher"})
	if res := completed(t, cs, rejected); !res.IsError || !strings.Contains(text(res), "rejected by sue") || !strings.Contains(text(res), "already got a voucher") {
		t.Errorf("rejected task: %s (isError %v), want the approver's reason", text(res), res.IsError)
	}

	expired := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-expire", "amount": 10}))
	if res := completed(t, cs, expired); !res.IsError || !strings.Contains(text(res), "nobody approved it in time") || gateOf(t, res).Decision != "expired" {
		t.Errorf("expired task: %s (isError %v)", text(res), res.IsError)
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-t2 400"}) {
		t.Errorf("upstream got %v, want the edited call only", got)
	}
	// A call the gate allows at once is no task: its result comes back.
	if res := call(t, cs, "issue_refund", map[string]any{"orderId": "o-t4", "amount": 20}); res.IsError || text(res) != "refunded 20 on o-t4" {
		t.Errorf("allowed call: %s (isError %v)", text(res), res.IsError)
	}
}

func TestGatewaysTaskOnTheWireIsTheExtensions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); _ = ss.Wait() })
	n := 0
	// rpc sends one request in the stateless form of the protocol
	// (2026-07-28: the client's capabilities in each request's _meta).
	rpc := func(method string, params map[string]any, ext bool) (map[string]any, error) {
		t.Helper()
		caps := map[string]any{}
		if ext {
			caps["extensions"] = map[string]any{mcpgateway.TasksExtension: map[string]any{}}
		}
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "claude-desktop", "version": "v0"},
		}
		raw, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		n++
		id, _ := jsonrpc.MakeID(float64(n))
		if err := conn.Write(t.Context(), &jsonrpc.Request{ID: id, Method: method, Params: raw}); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := conn.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			res, ok := msg.(*jsonrpc.Response)
			if !ok || res.ID != id {
				continue
			}
			if res.Error != nil {
				return nil, res.Error
			}
			var m map[string]any
			if err := json.Unmarshal(res.Result, &m); err != nil {
				t.Fatal(err)
			}
			return m, nil
		}
	}
	args := map[string]any{"orderId": "o-t5", "amount": 900}
	// Without the extension: the result that says the call waits.
	plain, err := rpc("tools/call", map[string]any{"name": "issue_refund", "arguments": args}, false)
	if err != nil {
		t.Fatal(err)
	}
	if plain["resultType"] == "task" || plain["isError"] != true || !strings.Contains(plain["content"].([]any)[0].(map[string]any)["text"].(string), "awaits approval") {
		t.Fatalf("tools/call without the tasks extension: %v", plain)
	}
	// With it: a CreateTaskResult.
	created, err := rpc("tools/call", map[string]any{"name": "issue_refund", "arguments": args}, true)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || created["status"] != "working" || !strings.HasPrefix(id, "mcp-") || created["pollIntervalMs"] != float64(5000) ||
		created["ttlMs"] == nil || created["createdAt"] == nil || created["lastUpdatedAt"] == nil || created["content"] != nil {
		t.Fatalf("CreateTaskResult: %v", created)
	}
	got, err := rpc("tasks/get", map[string]any{"taskId": id}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got["resultType"] != "complete" || got["status"] != "working" || got["taskId"] != id {
		t.Fatalf("tasks/get: %v", got)
	}
	if ack, err := rpc("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"x": map[string]any{}}}, true); err != nil || ack["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v, %v", ack, err)
	}
	// A task id that is no call of this client's is refused, as invalid
	// params.
	for _, bad := range []string{"mcp-0000", "booking-1", "", "mcp-a.b"} {
		_, err := rpc("tasks/get", map[string]any{"taskId": bad}, true)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != -32602 || !strings.Contains(we.Message, "unknown task") {
			t.Errorf("tasks/get %q: %v, want -32602 unknown task", bad, err)
		}
	}
}

func TestGatewayTaskOfAnotherAgentIsUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	mine := taskClient(t, gw, "claude-desktop")
	theirs := taskClient(t, gw, "other-agent")
	id := taskOf(t, call(t, mine, "issue_refund", map[string]any{"orderId": "o-t6", "amount": 900}))
	e.decide(id, protocol.Resume{Decision: "approve"})
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		if _, err := taskCall(t, theirs, m, id); err == nil || !strings.Contains(err.Error(), "unknown task") {
			t.Errorf("%s of another agent's task: %v, want unknown task", m, err)
		}
	}
	if got := e.up.got(); len(got) != 0 {
		t.Errorf("another agent's poll ran %v", got)
	}
	if res := completed(t, mine, id); res.IsError {
		t.Errorf("own task: %s", text(res))
	}
}

func TestGatewayCancelsAWaitingTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	cs := taskClient(t, gw, "claude-desktop")
	id := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-t7", "amount": 900}))
	if _, err := taskCall(t, cs, "tasks/cancel", id); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the task cancelled", func() bool { return getTask(t, cs, id).Status == mcpgateway.TaskCancelled })
	// Nobody can approve it any more.
	c := e.svc.Client("/test")
	ev, err := e.svc.ResumeAs(t.Context(), c, client.GateFlow, id, protocol.Resume{Decision: "approve"}, "sue", []string{"supervisor"})
	if err != nil || ev.Kind != protocol.EventRefused {
		t.Errorf("approving a cancelled task: %v %v, want refused", ev.Kind, err)
	}
	if got := e.up.got(); len(got) != 0 {
		t.Errorf("upstream got %v", got)
	}
}

func TestGatewayRestartedWhileATaskWaitsRunsItWhenApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	args := map[string]any{"orderId": "o-t8", "amount": 900}
	id := taskOf(t, call(t, taskClient(t, gw, "claude-desktop"), "issue_refund", args))
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	// Another gateway answers for the task; the decision comes after it
	// started.
	gw, _ = e.gateway(mcpgateway.Config{}, "claude-desktop")
	cs := taskClient(t, gw, "claude-desktop")
	if task := getTask(t, cs, id); task.Status != mcpgateway.TaskWorking {
		t.Fatalf("after the restart: %+v", task)
	}
	e.decide(id, protocol.Resume{Decision: "approve"})
	if res := completed(t, cs, id); res.IsError || text(res) != "refunded 900 on o-t8" {
		t.Fatalf("after the restart: %s (isError %v)", text(res), res.IsError)
	}
	if n := e.interrupts(id); n != 1 {
		t.Errorf("%d approvals asked, want 1", n)
	}
}

// A task approved while no gateway ran runs at its first poll on the
// gateway that answers for it, once: its approval is taken in Interlock,
// so no gateway runs it twice, and the same call made again afterwards is
// asked anew.
func TestGatewayRunsATaskApprovedWhileItWasDownOnceAndTheCallAgainIsAskedAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	args := map[string]any{"orderId": "o-t9", "amount": 900}
	id := taskOf(t, call(t, taskClient(t, gw, "claude-desktop"), "issue_refund", args))
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	e.decide(id, protocol.Resume{Decision: "approve"})
	gw, plain := e.gateway(mcpgateway.Config{Wait: testWait}, "claude-desktop")
	cs := taskClient(t, gw, "claude-desktop")
	if res := completed(t, cs, id); res.IsError || text(res) != "refunded 900 on o-t9" {
		t.Fatalf("task approved while the gateway was down: %s (isError %v)", text(res), res.IsError)
	}
	// A third gateway polled for it does not run it again.
	other, _ := e.gateway(mcpgateway.Config{}, "claude-desktop")
	if res := completed(t, taskClient(t, other, "claude-desktop"), id); !res.IsError || !strings.Contains(text(res), "was used already") {
		t.Fatalf("the task polled on another gateway: %s (isError %v), want it not run again", text(res), res.IsError)
	}
	// The call made again is a new call, asked anew.
	again := call(t, plain, "issue_refund", args)
	if g := gateOf(t, again); !again.IsError || g.Decision != mcpgateway.DecisionPending || g.CallID == id {
		t.Fatalf("the call again: %s (gate %+v), want another call, asked anew", text(again), g)
	}
	if got := e.up.got(); !slices.Equal(got, []string{"issue_refund o-t9 900"}) {
		t.Fatalf("upstream got %v, want the refund once", got)
	}
}

// TestATaskWhoseTakeWentUnansweredEndsWithItsCallsResult: a client that
// takes tasks polls its approved call, and the gateway's take of the
// approval goes unanswered (the network stalls). The task is not ended
// with word that the call has not run: polls are told it is still
// working, and once the network is back it ends with the call's result,
// the tool called once.
func TestATaskWhoseTakeWentUnansweredEndsWithItsCallsResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs natstest.Buffer
	p, _, gw := e.stalledGatewayOf(func(c *mcpgateway.Config) {
		l := zerolog.New(&logs)
		c.Logger = &l
	})
	cs := taskClient(t, gw, "support-bot")
	id := taskOf(t, call(t, cs, "issue_refund", map[string]any{"orderId": "o-task", "amount": 900}))
	e.decide(id, protocol.Resume{Decision: "approve"})
	p.arm()
	// The first poll after the decision takes the approval: the take
	// stalls, and the poll is answered meanwhile.
	if task := getTask(t, cs, id); task.Status != mcpgateway.TaskWorking || task.Result != nil {
		t.Fatalf("the poll whose take went unanswered: %s %v, want the task still working", task.Status, resultText(task.Result))
	}
	select {
	case <-p.hit:
	default:
		t.Fatal("the poll after the decision sent no take")
	}
	natstest.Eventually(t, "the gateway sending its unanswered take again", func() bool {
		return strings.Contains(logs.String(), "sent again is still unanswered")
	})
	p.resume()
	res := completed(t, cs, id)
	if res.IsError || text(res) != "refunded 900 on o-task" {
		t.Fatalf("the task's result: %s, want the refund", text(res))
	}
	if got := e.up.got(); len(got) != 1 {
		t.Fatalf("upstream calls %v, want the refund once", got)
	}
}

// resultText is the text of a task's result, or "no result".
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	return text(res)
}
