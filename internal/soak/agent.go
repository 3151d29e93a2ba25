package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// source is the CloudEvents source of the agents' commands.
const source = "/soak/agent"

// How an agent polls a run's checkpoint: from firstPoll, doubling to
// maxPoll, back to firstPoll when the run moves.
const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 250 * time.Millisecond
)

// publishWait bounds one publish: a server that was killed does not answer.
const publishWait = 2 * time.Second

// agents drive the runs of a soak.
type agents struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	c     *client.Client
	names wire.Names
	// runs counts the runs handed to the agents so far.
	runs atomic.Int64
	// ended counts runs an agent saw end; left those the agents left for
	// lack of progress on their first pass.
	ended, left atomic.Int64
	// approvers decide refunds, by role (Config.Refunds); authenticated
	// is set where NATS authenticates its clients, so that a decision's
	// caller is nats:<role>.
	approvers     map[string]*approver
	authenticated bool
	// secret is the deployment's secret, with which a service of the
	// deployment vouches for the people it authenticated.
	secret []byte
	// others are the approvers' connections, closed with the agents'.
	others []*nats.Conn
	// pendingLeft are the keys of the pending entries of runs that ended
	// which the check found the bucket's leader still lists.
	pendingLeft []string
	// moot holds the asks whose reminder came after their expiry
	// (Report.RemindersMoot), by run.
	moot sync.Map
	// callbacks receives the asks' callbacks (Config.Asks).
	callbacks *callbacks
	// acked holds the event ids of the commands JetStream acknowledged,
	// shared with the checker's agents.
	acked *sync.Map
	// mcp are the agent's instances' sessions with the MCP gateway, and
	// upstream the MCP server behind it (Config.Gateway); gateway holds
	// a *gatewayRecord by gateway run, shared with the checker's agents,
	// and unrun the gateway runs whose approval was taken without the
	// tool running (Report.GatewayUnrun).
	mcp      []*mcp.ClientSession
	upstream *upstream
	gateway  *sync.Map
	unrun    sync.Map
	// leftRuns holds the runs the agents left for lack of progress on
	// their first pass (shared with the checker's agents), and
	// leftExpired the gate runs among them whose deadline passed before
	// the agents came back (Report.LeftExpired).
	leftRuns    *sync.Map
	leftExpired sync.Map
	// gatewayTaken and gatewayAnew count the instances told, as they made
	// an approved call, that its approval was taken, or asked anew.
	gatewayTaken, gatewayAnew atomic.Int64
	// hist is what the agents were told of each run's commands, by run.
	histMu sync.Mutex
	hist   map[string][]string
}

// newAgents connects with conn, as an agent service would.
func newAgents(ctx context.Context, cfg Config, conn wire.ConnConfig) (*agents, error) {
	nc, js, err := wire.Connect(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("soak: connecting the agents: %w", err)
	}
	names, _ := wire.NewNames("")
	return &agents{nc: nc, js: js, c: client.New(nc, js, names, source, 2*time.Second), names: names}, nil
}

func (a *agents) close() {
	for _, cs := range a.mcp {
		_ = cs.Close()
	}
	for _, nc := range a.others {
		nc.Close()
	}
	a.nc.Close()
}

// runID is the id of the i-th run.
func runID(i int) string { return fmt.Sprintf("soak-%06d", i) }

// maxRunsFactor bounds the runs a soak drives while it waits for its
// faults: this many times Config.Runs.
const maxRunsFactor = 10

// drive drives cfg.Runs runs to their end with cfg.Agents agents, more
// until cfg.Duration has passed, and more for as long as faulting is open (the faults still to come, when there is
// a number of them: so that every fault strikes under load), up to
// maxRunsFactor times as many. The runs an agent left for lack of progress
// are driven once more after all the others, as an agent coming back to
// the interrupts still waiting for it would; a run not ended then is
// stuck.
func (a *agents) drive(ctx context.Context, cfg Config, faulting <-chan struct{}) error {
	until := time.Now().Add(cfg.Duration)
	all := func(yield func(int) bool) {
		for i := 0; i < cfg.Runs || open(faulting) && i < maxRunsFactor*cfg.Runs || time.Now().Before(until); i++ {
			a.runs.Store(int64(i + 1))
			if !yield(i) {
				return
			}
		}
	}
	left := a.pass(ctx, cfg, all)
	a.left.Store(int64(len(left)))
	for _, i := range left {
		a.leftRuns.Store(i, true)
	}
	if len(left) > 0 && ctx.Err() == nil {
		fmt.Fprintf(cfg.Progress, "soak: agents left %d runs for lack of progress; driving them again\n", len(left))
		a.pass(ctx, cfg, slices.Values(left))
	}
	return ctx.Err()
}

// open reports whether c is open (nil is closed).
func open(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return false
	default:
		return true
	}
}

// pass drives runs with cfg.Agents agents and returns those left without
// an end.
func (a *agents) pass(ctx context.Context, cfg Config, runs iter.Seq[int]) (left []int) {
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range runs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range cfg.Agents {
		wg.Go(func() {
			for i := range next {
				drive := a.driveRun
				switch {
				case isRefund(cfg, i):
					drive = a.driveRefund
				case isAsk(cfg, i):
					drive = a.driveAsk
				case isGate(cfg, i):
					drive = a.driveGate
				case isGateway(cfg, i):
					drive = a.driveGateway
				}
				if drive(ctx, cfg, i) {
					a.ended.Add(1)
					continue
				}
				mu.Lock()
				left = append(left, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(left)
	return left
}

// command is a command an agent sends until it takes effect, always the
// same message: a copy that JetStream already holds is dropped by its
// Nats-Msg-Id, and one the server lost is stored again.
type command struct {
	msg  *nats.Msg
	sent time.Time
	// run is the run it is for; role who sends it: "agent", or an
	// approver's role.
	run, role string
	// js publishes it: the agents' connection when nil, else that of the
	// approver who sends it.
	js jetstream.JetStream
	// notBefore, if set, holds it back until then; when, if set, until
	// the run's checkpoint satisfies it.
	notBefore time.Time
	when      func(protocol.Checkpoint) bool
}

// newCommand builds a command with event id id.
func (a *agents) newCommand(subject, typ, run, id string, data any) (*command, error) {
	ev, err := events.New(id, source, typ, run, time.Now().UTC(), data)
	if err != nil {
		return nil, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	return &command{msg: msg, run: run, role: "agent"}, nil
}

// send publishes cmd unless it was published less than retry ago. A
// publish that fails (the server is down, no ack in time) is retried at
// the next call.
func (a *agents) send(ctx context.Context, cmd *command, retry time.Duration) {
	if !cmd.sent.IsZero() && time.Since(cmd.sent) < retry || time.Now().Before(cmd.notBefore) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, publishWait)
	defer cancel()
	js := cmd.js
	if js == nil {
		js = a.js
	}
	ack, err := js.PublishMsg(pctx, cmd.msg)
	if err == nil {
		cmd.sent = time.Now()
		if a.acked != nil {
			a.acked.Store(cmd.msg.Header.Get(jetstream.MsgIDHeader), true)
		}
	}
	// What the client was told, for the history of a run found wrong.
	told := ""
	switch {
	case err != nil:
		told = "not acknowledged: " + err.Error()
	case ack.Duplicate:
		told = fmt.Sprintf("acknowledged as a duplicate of %s #%d", ack.Stream, ack.Sequence)
	default:
		told = fmt.Sprintf("acknowledged: %s #%d", ack.Stream, ack.Sequence)
	}
	a.log(cmd.run, "sent %s on %s (%s): %s", cmd.msg.Header.Get(jetstream.MsgIDHeader), cmd.msg.Subject, cmd.role, told)
}

// maxHistory bounds the lines kept of each run's commands.
const maxHistory = 64

// log adds a line to run's history of what its agent was told.
func (a *agents) log(run, format string, args ...any) {
	if run == "" {
		return
	}
	a.histMu.Lock()
	defer a.histMu.Unlock()
	if a.hist == nil {
		a.hist = map[string][]string{}
	}
	if h := a.hist[run]; len(h) < maxHistory {
		a.hist[run] = append(h, time.Now().UTC().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
}

// driveRun starts run i and answers each of its interrupts until it ends,
// or until it has made no progress for cfg.Patience. It reports whether
// the run ended.
func (a *agents) driveRun(ctx context.Context, cfg Config, i int) bool {
	run := runID(i)
	start, err := a.newCommand(a.names.In(booking.Name, "start"), protocol.TypeStart, run, run+"-start", protocol.Start{})
	if err != nil {
		return false
	}
	resumes := map[string]*command{} // by request id
	return a.follow(ctx, cfg, booking.Name, run, start, func(cp protocol.Checkpoint) {
		a.answer(ctx, cfg, i, cp, resumes)
	})
}

// follow starts run of flow with the command start (sent again until
// the run exists; nil for a run started otherwise) and calls waiting with
// its checkpoint whenever it waits, until it ends or has made no progress
// for cfg.Patience. It reports whether the run ended. It polls the
// checkpoint from firstPoll, doubling to maxPoll, back to firstPoll when
// the run moves.
func (a *agents) follow(ctx context.Context, cfg Config, flow, run string, start *command, waiting func(protocol.Checkpoint)) bool {
	lastMove := time.Now()
	var lastRev uint64
	poll := firstPoll
	for time.Since(lastMove) < cfg.Patience {
		cp, err := a.c.Checkpoint(ctx, flow, run)
		switch {
		case errors.Is(err, client.ErrNotFound) && start != nil:
			a.send(ctx, start, cfg.Retry)
		case err != nil:
			// The server is down or a leader is being elected: read again.
		case cp.Finished():
			return true
		case cp.Checkpoint != lastRev:
			lastRev, lastMove, poll = cp.Checkpoint, time.Now(), firstPoll
		}
		if err == nil && cp.Waiting() {
			waiting(cp)
		}
		if wait(ctx, poll) != nil {
			return false
		}
		poll = min(2*poll, maxPoll)
	}
	return false
}

// answer sends the resume of the interrupt cp waits on: the answers run i
// gives at that node, a note naming the node, and an idempotency key
// naming run and node. Its token is the one the interrupted event of that
// request carries.
func (a *agents) answer(ctx context.Context, cfg Config, i int, cp protocol.Checkpoint, resumes map[string]*command) {
	req := cp.Interrupt.RequestID
	cmd := resumes[req]
	if cmd == nil {
		in, err := a.c.LastInterrupt(ctx, booking.Name, cp.Run)
		if err != nil || in.RequestID != req {
			return // not announced yet, or the run moved: read again
		}
		r, err := resumeFor(i, in.Node)
		if err != nil {
			return
		}
		r.ResumeToken = in.ResumeToken
		key := cp.Run + "-" + in.Node
		r.IdempotencyKey = key
		if cmd, err = a.newCommand(a.names.In(booking.Name, "resume"), protocol.TypeResume, cp.Run, key, r); err != nil {
			return
		}
		resumes[req] = cmd
	}
	a.send(ctx, cmd, cfg.Retry)
}

// The options of booking's pick_topics.
var topics = []string{"product", "design", "engineering"}

// levels are the levels booking's ask_level accepts.
var levels = []string{"beginner", "intermediate", "advanced"}

// answers are what run i answers at each node of booking, as resume
// fields; expected is the final state they imply.
func answers(i int) (byNode map[string]protocol.Resume, expected booking.State) {
	run := runID(i)
	expected = booking.State{
		Email:  run + "@example.com",
		Name:   fmt.Sprintf("Person %d", i),
		Phone:  fmt.Sprintf("+49 30 %07d", i),
		Level:  levels[i%len(levels)],
		Driver: booking.Driver{Name: fmt.Sprintf("Driver %d", i), License: fmt.Sprintf("DL-%06d", i)},
		Notes:  []string{"ask_email", "ask_contact", "ask_level", "ask_driver", "pick_topics"},
	}
	// A non-empty subset of the topics, from the run's number.
	for b, t := range topics {
		if (i%7+1)&(1<<b) != 0 {
			expected.Topics = append(expected.Topics, t)
		}
	}
	q := func(kv ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for j := 0; j < len(kv); j += 2 {
			b, _ := json.Marshal(kv[j+1])
			m[kv[j]] = b
		}
		return m
	}
	byNode = map[string]protocol.Resume{
		// Upper case and spaces that booking's validator normalises.
		"ask_email":   {Answers: q("email", "  Soak-"+run[len("soak-"):]+"@EXAMPLE.com ")},
		"ask_contact": {Answers: q("name", expected.Name, "phone", expected.Phone)},
		"ask_level":   {Answers: q("level", expected.Level)},
		"ask_driver":  {Answers: q("driver.name", expected.Driver.Name, "driver.license", expected.Driver.License)},
		"pick_topics": {Selected: expected.Topics},
	}
	for node, r := range byNode {
		r.Update = q("notes", node)
		byNode[node] = r
	}
	return byNode, expected
}

// resumeFor is run i's resume at node.
func resumeFor(i int, node string) (protocol.Resume, error) {
	byNode, _ := answers(i)
	r, ok := byNode[node]
	if !ok {
		return protocol.Resume{}, fmt.Errorf("soak: booking asks at node %s, which the soak does not know", node)
	}
	return r, nil
}
