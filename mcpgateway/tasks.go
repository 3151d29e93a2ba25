package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// TasksExtension is the MCP extension of task handles
// (io.modelcontextprotocol/tasks): a client that names it in a request's
// capabilities gets, for a call that waits for a person, a task it polls
// with tasks/get instead of a result that says the call awaits approval.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskPollInterval is how often the gateway asks clients to poll a task.
const TaskPollInterval = 5 * time.Second

// Task statuses, as tasks/get says them.
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskCancelled = "cancelled"
)

// relatedTaskKey is the _meta key that names a result's task, for clients
// that read results through types without the task's fields.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// Task is a task as tasks/get (and, with ResultType "task", the
// tools/call that made it) returns it: the state of one gated call. Its
// id is the call's callId: the task lives in Interlock, not in the
// gateway, so any gateway of the same deployment answers for it, also
// after a restart.
type Task struct {
	mcp.ResultBase
	// ResultType is "task" in a tools/call's result, "complete" in
	// tasks/get's.
	ResultType    string `json:"resultType"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long after its creation the task is kept, in
	// milliseconds; null while the call may wait for ever.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	// Result is the call's result once the task is completed.
	Result *mcp.CallToolResult `json:"result,omitempty"`
}

// TaskParams are the params of tasks/get, tasks/update and tasks/cancel.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// InputResponses answer a task's input requests (tasks/update). The
	// gateway's tasks never ask the client for input: a person decides
	// elsewhere.
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// Ack is the empty result of tasks/update and tasks/cancel.
type Ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskSlotKey keys, in a tools/call's context, the slot where the call
// leaves the task it made.
type taskSlotKey struct{}

// taskSlot is where a call that waits for a person leaves its task, for
// the tools/call to return instead of the call's result.
type taskSlot struct{ task *Task }

// taskRun is the one run of an approved task's call in this gateway:
// done closes when res holds its result.
type taskRun struct {
	done chan struct{}
	res  *mcp.CallToolResult
	at   time.Time
}

// serveTasks makes g's MCP server take tasks: it says so in its
// capabilities, answers tasks/get, tasks/update and tasks/cancel, and
// returns a task for a tools/call that waits for a person when the
// request's capabilities name TasksExtension.
func (g *Gateway) serveTasks() error {
	g.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" || !takesTasks(req) {
				return next(ctx, method, req)
			}
			slot := &taskSlot{}
			res, err := next(context.WithValue(ctx, taskSlotKey{}, slot), method, req)
			if err == nil && slot.task != nil {
				return slot.task, nil
			}
			return res, err
		}
	})
	return errors.Join(
		mcp.AddReceivingCustomMethod(g.mcp, "tasks/get", func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*Task, error) {
			return g.getTask(ctx, ss, p.TaskID)
		}),
		mcp.AddReceivingCustomMethod(g.mcp, "tasks/update", func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*Ack, error) {
			if _, _, err := g.loadTask(ctx, ss, p.TaskID); err != nil {
				return nil, err
			}
			return &Ack{ResultType: "complete"}, nil
		}),
		mcp.AddReceivingCustomMethod(g.mcp, "tasks/cancel", func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*Ack, error) {
			return g.cancelTask(ctx, ss, p.TaskID)
		}),
	)
}

// takesTasks reports whether req's client takes task handles: the
// request's own capabilities (in its _meta) or, for a client that
// introduced itself with initialize, its session's name TasksExtension.
func takesTasks(req mcp.Request) bool {
	if p := req.GetParams(); p != nil {
		if caps, ok := p.GetMeta()[mcp.MetaKeyClientCapabilities].(map[string]any); ok {
			if ext, ok := caps["extensions"].(map[string]any); ok {
				if _, ok := ext[TasksExtension]; ok {
					return true
				}
			}
		}
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	_, ok = ip.Capabilities.Extensions[TasksExtension]
	return ok
}

// gateState is what the gateway reads of a gate run's state.
type gateState struct {
	Tool    string            `json:"tool"`
	Server  string            `json:"server"`
	Args    json.RawMessage   `json:"args"`
	Agent   string            `json:"agent"`
	Decided *protocol.Decided `json:"decided"`
}

// unknownTask is the error of a task id the gateway does not know for
// the caller.
func unknownTask(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q: give the taskId a tools/call of this client returned", id)}
}

// refusedTask is the error of a task the deployment's authority refuses
// the gateway's sender, worded as every refusal is.
func refusedTask(code protocol.Code, reason string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("refused (%s): %s", code, reason)}
}

// loadTask reads the gate run of task id, which must be a call of the
// session's agent through a gateway, and one the deployment's authority
// lets the gateway's sender for that agent read.
func (g *Gateway) loadTask(ctx context.Context, ss *mcp.ServerSession, id string) (protocol.Checkpoint, gateState, error) {
	var st gateState
	if !strings.HasPrefix(id, "mcp-") || client.CheckName("task id", id) != nil {
		return protocol.Checkpoint{}, st, unknownTask(id)
	}
	agent, _ := g.agent(ss)
	cp, err := g.client(agent).Checkpoint(ctx, client.GateFlow, id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return cp, st, unknownTask(id)
	case err != nil:
		return cp, st, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("reading task %s from Interlock failed: %v; poll again later", id, err)}
	}
	var ref *authority.Refusal
	if err := g.port.Authority().MayRead(g.caller(agent), authority.RunOf(cp)); errors.As(err, &ref) {
		return cp, st, refusedTask(ref.Code, ref.Reason)
	}
	if err := json.Unmarshal(cp.State, &st); err != nil {
		return cp, st, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s: its gate run's state does not decode: %v", id, err)}
	}
	// Another agent's call is no task of this client's: it may neither
	// see it nor, by polling it, make the gateway run it. Where the
	// deployment takes names at their word, the authority lets any
	// sender read it, and the agent's label is what tells them apart.
	if st.Agent != agent {
		return cp, st, unknownTask(id)
	}
	return cp, st, nil
}

// newTask is the task of a call that now waits for a person, read back
// from Interlock, so that tasks/get answers for it before the client has
// it.
func (g *Gateway) newTask(ctx context.Context, c *client.Client, agent, callID string) (*Task, error) {
	cp, err := c.Checkpoint(ctx, client.GateFlow, callID)
	if err != nil {
		return nil, err
	}
	t := g.taskOf(cp)
	t.ResultType = "task"
	t.Meta = mcp.Meta{relatedTaskKey: map[string]string{"taskId": callID}, MetaKey: Gate{CallID: callID, Decision: DecisionPending}}
	if t.Status != TaskWorking {
		// Decided in the instant between the two reads: the client
		// polls and gets the outcome.
		t.Status, t.StatusMessage = TaskWorking, ""
	}
	return t, nil
}

// taskOf is the task of a gate run, without its result.
func (g *Gateway) taskOf(cp protocol.Checkpoint) *Task {
	t := &Task{ResultType: "complete", TaskID: cp.Run, Status: TaskCompleted,
		CreatedAt: cp.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: cp.UpdatedAt.UTC().Format(time.RFC3339Nano),
		PollIntervalMs: TaskPollInterval.Milliseconds()}
	// A call is kept while it waits, and answers from its decision for
	// the repeat window after.
	keep := g.cfg.RepeatWindow
	switch in, ok := cp.Interrupted(); {
	case cp.Waiting() && ok:
		t.Status = TaskWorking
		t.StatusMessage = "Awaits a person's approval" + waitsFor(in)
		if in.ExpiresAt == nil {
			return t
		}
		keep += in.ExpiresAt.Sub(cp.CreatedAt)
	case cp.Status == protocol.StatusCancelled:
		t.Status = TaskCancelled
		keep += cp.UpdatedAt.Sub(cp.CreatedAt)
	case !cp.Finished():
		t.Status = TaskWorking
		return t
	default:
		keep += cp.UpdatedAt.Sub(cp.CreatedAt)
	}
	ms := keep.Milliseconds()
	t.TTLMs = &ms
	return t
}

// getTask answers tasks/get: the task of a gated call and, once it is
// decided, its result. An approved call runs from its first poll after
// the decision, once, in the background, and later polls get the same
// result; a poll waits for it up to the gateway's wait, and is told
// meanwhile that the task is still working.
func (g *Gateway) getTask(ctx context.Context, ss *mcp.ServerSession, id string) (*Task, error) {
	cp, st, err := g.loadTask(ctx, ss, id)
	if err != nil {
		return nil, err
	}
	t := g.taskOf(cp)
	if t.Status != TaskCompleted {
		return t, nil
	}
	g.mu.Lock()
	run, ok := g.tasks[id]
	if !ok {
		g.pruneTasks()
		run = &taskRun{done: make(chan struct{})}
		g.tasks[id] = run
	}
	g.mu.Unlock()
	if !ok {
		agent, _ := g.agent(ss)
		g.startTask(run, agent, cp, st)
	}
	wait := time.NewTimer(g.cfg.Wait)
	defer wait.Stop()
	select {
	case <-run.done:
		t.Result = run.res
		return t, nil
	case <-wait.C:
		t.Status, t.StatusMessage = TaskWorking, "Decided; the gateway is finishing the call. Poll again for its result."
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startTask has runTask compute run's result in the background, owned
// by the gateway (its Close waits for it), or says the gateway is
// shutting down.
func (g *Gateway) startTask(run *taskRun, agent string, cp protocol.Checkpoint, st gateState) {
	g.mu.Lock()
	closed := g.closed
	if !closed {
		g.calls.Add(1)
	}
	g.mu.Unlock()
	if closed {
		name, _, ok := g.routeOf(st.Server, st.Tool)
		if !ok {
			name = st.Tool
		}
		run.res, run.at = failed(Gate{CallID: cp.Run}, "The call of %s did not run: the gateway is shutting down. Call it again once it is back.", name), time.Now()
		close(run.done)
		return
	}
	go func() {
		defer g.calls.Done()
		g.runTask(run, agent, cp, st)
	}()
}

// runTask computes the result of a decided task, once per gateway: an
// approved call runs here, on the gateway's context, not the poll's (a
// poll given up does not stop a call under way), once its approval is
// taken in Interlock, which every gateway and every restart agrees on.
// Started by startTask.
func (g *Gateway) runTask(run *taskRun, agent string, cp protocol.Checkpoint, st gateState) {
	defer func() {
		run.at = time.Now()
		close(run.done)
	}()
	name, r, ok := g.routeOf(st.Server, st.Tool)
	if !ok {
		name = st.Tool
	}
	if st.Decided == nil {
		run.res = failed(Gate{CallID: cp.Run}, "The call of %s did not run: its gate run ended %s without a decision (%s).", name, cp.Status, or(cp.Error, "no error given"))
		return
	}
	d := *st.Decided
	gate := Gate{CallID: cp.Run, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, Rule: d.Rule}
	if !ok {
		run.res = failed(gate, "The call of %s was %s, but its tool is no longer offered by its server; it did not run.", name, d.Decision)
		return
	}
	digest, err := protocol.RawArgsDigest(st.Args)
	if err != nil {
		run.res = failed(gate, "The call of %s did not run: its args do not encode (%v).", name, err)
		return
	}
	// A task's result is polled for: a take whose outcome was not learned
	// is waited for until it is, so that the task ends with the call's
	// result, not with word that it has not run yet.
	run.res = g.outcome(g.done, g.client(agent), r, name, cp.Run, d, st.Args, digest, 0)
}

// pruneTasks forgets the results of tasks older than the repeat window.
// g.mu is held.
func (g *Gateway) pruneTasks() {
	for id, run := range g.tasks {
		select {
		case <-run.done:
			if time.Since(run.at) > g.cfg.RepeatWindow {
				delete(g.tasks, id)
			}
		default:
		}
	}
}

// cancelTask answers tasks/cancel: a call still waiting is cancelled in
// Interlock, which asks its authority whether the gateway's sender may,
// and nobody can approve it any more. A call already decided keeps its
// decision.
func (g *Gateway) cancelTask(ctx context.Context, ss *mcp.ServerSession, id string) (*Ack, error) {
	cp, _, err := g.loadTask(ctx, ss, id)
	if err != nil {
		return nil, err
	}
	if !cp.Finished() {
		agent, _ := g.agent(ss)
		if _, err := g.client(agent).Cancel(ctx, client.GateFlow, id, "cancelled by the MCP client (tasks/cancel)"); err != nil {
			var ref *client.RefusedError
			switch {
			case errors.As(err, &ref) && ref.Refused.Code == protocol.CodeNotWaiting:
				// Decided meanwhile: the decision stands.
			case errors.As(err, &ref):
				return nil, refusedTask(ref.Refused.Code, ref.Refused.Message)
			default:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("cancelling task %s in Interlock failed: %v; try again", id, err)}
			}
		}
	}
	return &Ack{ResultType: "complete"}, nil
}
