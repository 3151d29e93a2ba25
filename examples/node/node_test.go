//go:build unix

// Package node_test runs the Node.js example, bot.js and agent.js, against
// a real Interlock service and checks what they did on the bus.
package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/internal/tooltest"
	"github.com/interlockhq/interlock/protocol"
)

// TestMain checks that the service and the scripts' readers leave no
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// minNode is the oldest Node.js major version the example supports
// (package.json's engines).
const minNode = 20

// botName is the approver the bot decides as.
const botName = "test-bot"

// TestNodeAgentAndBot starts the example flows and the example gate rules,
// runs the approval bot and then the agent, each as `node` would for a
// user, and checks on the bus that the booking run completed with the
// agent's answers after a re-ask, and that the gate's approval was decided
// by the bot, as the agent reports.
func TestNodeAgentAndBot(t *testing.T) {
	node := requireNode(t)
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	names := svc.Names()
	_, js := natstest.Connect(t, srv.ClientURL())
	// The scripts connect without credentials, with the rights of any
	// client of the embedded server (bus.ClientPermissions).
	env := append(os.Environ(), "NATS_URL="+srv.ClientURL(), "BOT_NAME="+botName,
		"WAIT_SECONDS="+strconv.Itoa(int(natstest.Wait/time.Second)))

	bot := start(t, node, "bot.js", env)
	if line := bot.next(t); !strings.Contains(line, `"ready":"`+botName+`"`) {
		t.Fatalf("bot.js said %q first, want that it is ready", line)
	}

	agent := start(t, node, "agent.js", env)
	lines := agent.rest(t)
	if err := agent.wait(t); err != nil {
		t.Fatalf("agent.js: %v\nstdout:\n%s\nstderr:\n%s", err, agent.stdout(), agent.stderr.String())
	}
	var out []agentLine
	for _, line := range lines {
		var l agentLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("agent.js printed %q, not a JSON line: %v", line, err)
		}
		out = append(out, l)
	}
	bot.stop(t)
	if err := bot.wait(t); err != nil {
		t.Fatalf("bot.js did not stop cleanly on SIGTERM: %v\nstderr:\n%s", err, bot.stderr.String())
	}

	// The booking run, as the events stream tells it.
	run := step(t, out, "start").Run
	evs := natstest.WaitFor(t, js, names.EventStream(), names.Event(booking.Name, run, ">"), natstest.Nth("completed", 1))
	if n := natstest.Count(evs, "refused"); n != 0 {
		t.Errorf("the booking run refused %d of the agent's commands", n)
	}
	var (
		asks  []protocol.Interrupted
		nodes []string
	)
	for _, r := range evs {
		if r.Kind == "interrupted" {
			var in protocol.Interrupted
			r.Decode(t, &in)
			asks = append(asks, in)
			nodes = append(nodes, in.Node)
		}
	}
	// ask_email twice (the re-ask), then the rest once each.
	if want := []string{"ask_email", "ask_email", "ask_contact", "ask_level", "ask_driver", "pick_topics"}; !slices.Equal(nodes, want) || len(asks[1].Questions) != 1 {
		t.Fatalf("the run asked at %v, want %v", nodes, want)
	}
	const reask = "ERROR: That doesn't look like an email. Politely reject generic domains like gmail.com."
	if got := asks[1].Questions[0].Context; got != reask {
		t.Errorf("the re-ask's context is %q, want %q", got, reask)
	}
	if got := step(t, out, "reasked"); got.Field != "email" || got.Context != reask {
		t.Errorf("agent.js reported a re-ask of %q with context %q", got.Field, got.Context)
	}
	var done protocol.Completed
	natstest.Last(t, evs, "completed").Decode(t, &done)
	var state booking.State
	if err := json.Unmarshal(done.State, &state); err != nil {
		t.Fatal(err)
	}
	// agent.js's answers, the email as the validator stores it.
	want := booking.State{Email: "ann@example.com", Name: "Ann Lee", Phone: "555-0100", Level: "advanced",
		Driver: booking.Driver{Name: "Bob Lee", License: "D-123"}, Topics: []string{"product", "design"}}
	if !reflect.DeepEqual(state, want) {
		t.Errorf("the run completed with %+v, want %+v", state, want)
	}
	if got := step(t, out, "completed").State; !jsonEqual(got, done.State) {
		t.Errorf("agent.js printed the final state %s, the bus says %s", got, done.State)
	}
	started := audit(t, js, names.AuditStream(), names.Audit(booking.Name, run), "started")
	if started.By != "/agents/node-example" {
		t.Errorf("the start is audited as by %q, want agent.js's source", started.By)
	}

	// The tool-call gate: asked by the agent, decided by the bot.
	callID := step(t, out, "gate.requested").CallID
	evs = natstest.WaitFor(t, js, names.EventStream(), names.Event("gate", callID, ">"), natstest.Nth("decided", 1))
	var in protocol.Interrupted
	asked := natstest.Last(t, evs, "interrupted")
	asked.Decode(t, &in)
	if in.Kind != "approval" || in.Action != "issue_refund" || in.ApproverRole != "supervisor" || !jsonEqual(in.Args, json.RawMessage(`{"orderId":"o-1","amount":1200,"currency":"USD"}`)) {
		t.Fatalf("the gate asked %s", asked.Event.Data())
	}
	var decided protocol.Decided
	answer := natstest.Last(t, evs, "decided")
	answer.Decode(t, &decided)
	wantArgs := json.RawMessage(`{"orderId":"o-1","amount":1000,"currency":"USD"}`)
	if decided.Decision != "edited" || decided.Approver != botName || decided.Rule != "large-refund" || !jsonEqual(decided.Args, wantArgs) {
		t.Errorf("the gate decided %s, want edited to %s by %s under large-refund", answer.Event.Data(), wantArgs, botName)
	}
	edited := audit(t, js, names.AuditStream(), names.Audit("gate", callID), "edited")
	if edited.By != botName || edited.ApproverRole != "supervisor" || edited.Approval == nil || !jsonEqual(edited.Approval.Final, wantArgs) {
		t.Errorf("the decision is audited as %s, want edited to %s by %s", edited.Data, wantArgs, botName)
	}
	if got := step(t, out, "gate.decided"); got.Decision != decided.Decision || got.Approver != decided.Approver || !jsonEqual(got.Args, decided.Args) {
		t.Errorf("agent.js printed the decision %s %s by %s, the bus says %s", got.Decision, got.Args, got.Approver, answer.Event.Data())
	}
	if got := step(t, out, "tool.called"); !jsonEqual(got.Args, wantArgs) {
		t.Errorf("agent.js called the tool with %s, want the edited args %s", got.Args, wantArgs)
	}

	// The bot printed the one decision it made.
	var decisions []botLine
	for _, line := range bot.rest(t) {
		var l botLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("bot.js printed %q, not a JSON line: %v", line, err)
		}
		decisions = append(decisions, l)
	}
	if len(decisions) != 1 || decisions[0].Flow != "gate" || decisions[0].Run != callID || decisions[0].Decision != "edit" {
		t.Errorf("bot.js printed %+v, want one edit of %s", decisions, callID)
	}
}

// agentLine is a line agent.js prints.
type agentLine struct {
	Step     string          `json:"step"`
	Run      string          `json:"run"`
	CallID   string          `json:"callId"`
	Field    string          `json:"field"`
	Context  string          `json:"context"`
	State    json.RawMessage `json:"state"`
	Decision string          `json:"decision"`
	Approver string          `json:"approver"`
	Args     json.RawMessage `json:"args"`
	Code     string          `json:"code"`
	Message  string          `json:"message"`
	SDK      string          `json:"sdk"`
	Text     string          `json:"text"`
}

// TestNodeRefundInEachSDK runs the approval bot, then the refund agent of
// each agent SDK (refund-ai.js, refund-openai-agents.js,
// refund-langgraph.js, each on a scripted model), and checks that each
// refund of 1200 waited for the bot, which lowered it to 1000, and that
// each agent ran its tool with the edited args, as the bus says they were
// decided.
func TestNodeRefundInEachSDK(t *testing.T) {
	node := requireNode(t)
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	names := svc.Names()
	_, js := natstest.Connect(t, srv.ClientURL())
	env := append(os.Environ(), "INTERLOCK_URL="+srv.ClientURL(), "BOT_NAME="+botName,
		"WAIT_SECONDS="+strconv.Itoa(int(natstest.Wait/time.Second)))
	bot := start(t, node, "bot.js", env)
	if line := bot.next(t); !strings.Contains(line, `"ready":"`+botName+`"`) {
		t.Fatalf("bot.js said %q first, want that it is ready", line)
	}

	wantArgs := json.RawMessage(`{"orderId":"o-1","amount":1000,"currency":"USD"}`)
	for _, tc := range []struct{ script, sdk, flow string }{
		{"refund-ai.js", "ai", "gate"},
		{"refund-openai-agents.js", "openai-agents", "gate"},
		{"refund-langgraph.js", "langgraph", "ask"},
	} {
		agent := start(t, node, tc.script, env)
		lines := agent.rest(t)
		if err := agent.wait(t); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", tc.script, err, agent.stdout(), agent.stderr.String())
		}
		var out []agentLine
		for _, line := range lines {
			var l agentLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s printed %q, not a JSON line: %v", tc.script, line, err)
			}
			out = append(out, l)
		}
		if got := step(t, out, "tool.called"); got.SDK != tc.sdk || !jsonEqual(got.Args, wantArgs) {
			t.Errorf("%s called the tool with %s, want the edited args %s", tc.script, got.Args, wantArgs)
		}
		if got := step(t, out, "done"); !strings.Contains(got.Text, "1000") {
			t.Errorf("%s ended saying %q, want the refund of 1000", tc.script, got.Text)
		}

		// The bot's decision, and what the bus says was decided.
		var d botLine
		if err := json.Unmarshal([]byte(bot.next(t)), &d); err != nil {
			t.Fatalf("bot.js printed a line that is not JSON: %v", err)
		}
		if d.Flow != tc.flow || d.Decision != "edit" {
			t.Fatalf("bot.js decided %+v for %s, want an edit in flow %s", d, tc.script, tc.flow)
		}
		if tc.flow == "gate" {
			evs := natstest.WaitFor(t, js, names.EventStream(), names.Event("gate", d.Run, ">"), natstest.Nth("decided", 1))
			var decided protocol.Decided
			natstest.Last(t, evs, "decided").Decode(t, &decided)
			if decided.Decision != "edited" || decided.Approver != botName || !jsonEqual(decided.Args, wantArgs) {
				t.Errorf("the gate decided %s's call as %+v, want edited to %s by %s", tc.script, decided, wantArgs, botName)
			}
		} else {
			evs := natstest.WaitFor(t, js, names.EventStream(), names.Event("ask", d.Run, ">"), natstest.Nth("answered", 1))
			var answered struct {
				Status   string          `json:"status"`
				Decision string          `json:"decision"`
				Args     json.RawMessage `json:"args"`
				Approver string          `json:"approver"`
			}
			natstest.Last(t, evs, "answered").Decode(t, &answered)
			if answered.Status != "answered" || answered.Decision != "edit" || answered.Approver != botName || !jsonEqual(answered.Args, wantArgs) {
				t.Errorf("the ask of %s was answered %+v, want an edit to %s by %s", tc.script, answered, wantArgs, botName)
			}
		}
	}
	bot.stop(t)
	if err := bot.wait(t); err != nil {
		t.Fatalf("bot.js did not stop cleanly on SIGTERM: %v\nstderr:\n%s", err, bot.stderr.String())
	}
}

// TestNodeAgentIsToldAtOnceWhenTheGateIsOff runs the agent against a
// service without gate rules: its tool request is refused at once, code
// unsupported, with a message that says the gate is off and how to turn
// it on, and the agent stops on it rather than waiting for a decision.
func TestNodeAgentIsToldAtOnceWhenTheGateIsOff(t *testing.T) {
	node := requireNode(t)
	srv := natstest.StartServer(t, "")
	natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret})
	env := append(os.Environ(), "NATS_URL="+srv.ClientURL(), "WAIT_SECONDS="+strconv.Itoa(int(natstest.Wait/time.Second)))
	agent := start(t, node, "agent.js", env)
	lines := agent.rest(t)
	if err := agent.wait(t); err == nil {
		t.Fatalf("agent.js exited 0 with the gate off\nstdout:\n%s", agent.stdout())
	}
	var last agentLine
	if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil {
		t.Fatalf("agent.js printed %q", lines)
	}
	if last.Step != "refused" || last.CallID == "" || last.Code != string(protocol.CodeUnsupported) || !strings.Contains(last.Message, "gate is off") {
		t.Fatalf("agent.js ended with %+v, want the gate's refusal, unsupported, saying the gate is off", last)
	}
}

// botLine is a decision bot.js prints.
type botLine struct {
	Flow     string `json:"flow"`
	Run      string `json:"run"`
	Decision string `json:"decision"`
}

// step returns the first line of agent.js's output at step name.
func step(t *testing.T, out []agentLine, name string) agentLine {
	t.Helper()
	for _, l := range out {
		if l.Step == name {
			return l
		}
	}
	var steps []string
	for _, l := range out {
		steps = append(steps, l.Step)
	}
	t.Fatalf("agent.js printed no %q step, only %v", name, steps)
	return agentLine{}
}

// audit waits for the audit record of action under subject.
func audit(t *testing.T, js jetstream.JetStream, stream, subject, action string) protocol.AuditRecord {
	t.Helper()
	var rec protocol.AuditRecord
	natstest.WaitFor(t, js, stream, subject, func(rs []natstest.Received) bool {
		r, err := protocol.DecodeAuditRecord(rs[len(rs)-1].Event.Data())
		rec = r
		return err == nil && r.Action == action
	})
	return rec
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// requireNode returns the path of node, when it and the example's
// node_modules are there; otherwise it skips the test, or fails it in CI.
func requireNode(t *testing.T) string {
	t.Helper()
	const how = "install Node.js 20 or later (Debian: apt-get install nodejs npm) and run `npm ci` in clients/typescript and then in examples/node"
	missing := func(what string) {
		t.Helper()
		tooltest.Missing(t, what, how)
	}
	node := tooltest.Node(t, minNode, how)
	for _, dep := range []string{"@interlockhq/client", "ai", "@openai/agents", "@langchain/langgraph", "@a2a-js/sdk"} {
		if _, err := os.Stat(filepath.Join("node_modules", dep)); err != nil {
			missing("examples/node/node_modules/" + dep + " is missing")
		}
	}
	if _, err := os.Stat(filepath.Join(clientDir, "node_modules", "typescript")); err != nil {
		missing("clients/typescript/node_modules is missing (the example runs the client from there)")
	}
	buildClient.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), buildWait)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "run", "build")
		cmd.Dir = clientDir
		cmd.WaitDelay = natstest.Wait
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("npm run build in clients/typescript: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return node
}

// clientDir is the client's package, @interlockhq/client, which
// package.json links (file:../../clients/typescript): the scripts run its
// dist, which the tests build first.
const clientDir = "../../clients/typescript"

// buildWait bounds the client's build.
const buildWait = 5 * time.Minute

var (
	buildClient sync.Once
	buildErr    error
)

// scriptWait bounds the life of a script: it is killed after it.
const scriptWait = 4 * natstest.Wait

// proc is a script running under node.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    chan string // stdout, a line at a time; closed at its end
	seen   []string    // the lines read from out so far
	stderr natstest.Buffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// start runs script, with args, with env in the example's folder. It is
// killed, and waited for, at cleanup if it is still running then.
func start(t *testing.T, node, script string, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), scriptWait)
	p := &proc{name: script, out: make(chan string, 1024), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	p.cmd.Env = env
	p.cmd.Stderr = &p.stderr
	pr, pw := io.Pipe()
	p.cmd.Stdout = pw
	p.cmd.WaitDelay = natstest.Wait
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", script, err)
	}
	go func() {
		defer close(p.out)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.out <- sc.Text()
		}
	}()
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		for range p.out {
		}
	})
	return p
}

// next returns the next line the script prints, failing the test if none
// comes within natstest.Wait.
func (p *proc) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-p.out:
		if !ok {
			<-p.done
			t.Fatalf("%s ended (%v) after printing:\n%s\nstderr:\n%s", p.name, p.err, p.stdout(), p.stderr.String())
		}
		p.seen = append(p.seen, line)
		return line
	case <-time.After(natstest.Wait):
		t.Fatalf("%s printed nothing more in %s after:\n%s\nstderr:\n%s", p.name, natstest.Wait, p.stdout(), p.stderr.String())
		return ""
	}
}

// rest returns every line the script prints until it ends, each within
// natstest.Wait of the one before.
func (p *proc) rest(t *testing.T) []string {
	t.Helper()
	var lines []string
	for {
		select {
		case line, ok := <-p.out:
			if !ok {
				return lines
			}
			p.seen = append(p.seen, line)
			lines = append(lines, line)
		case <-time.After(natstest.Wait):
			t.Fatalf("%s neither printed nor ended in %s after:\n%s\nstderr:\n%s", p.name, natstest.Wait, p.stdout(), p.stderr.String())
		}
	}
}

// wait waits for the script to end, and returns how it did.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(scriptWait):
		t.Fatalf("%s did not end in %s", p.name, scriptWait)
		return nil
	}
}

// stop asks the script to stop, as Ctrl-C or a service manager would.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("stopping %s: %v", p.name, err)
	}
}

// stdout is what the test has read of the script's output.
func (p *proc) stdout() string { return strings.Join(p.seen, "\n") }
