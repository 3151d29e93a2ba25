package a2aremote

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

const (
	// DefaultPoll is how often each followed task is read.
	DefaultPoll = 2 * time.Second
	// KeepFollowed is how long a task is followed: one that has not
	// settled by then is followed again only if asked again.
	KeepFollowed = 31 * 24 * time.Hour
	// askPrefix begins the id of every ask made of a remote task.
	askPrefix = "a2r-"
	// callTimeout bounds one call to a remote agent.
	callTimeout = 15 * time.Second
	// source is the asks' sender.
	source = "interlock/a2a-remote"
)

// Port is what the client side needs of Interlock: the
// *interlock.Service provides it.
type Port interface {
	Client(source string) *client.Client
	// ClientAs returns a client that sends every command vouched for
	// caller: the asks are the follower's, vouched as the HTTP API
	// authenticated them.
	ClientAs(source string, caller protocol.Caller) (*client.Client, error)
	JetStream() jetstream.JetStream
	Names() wire.Names
	Egress() egress.Policy
}

// Config configures a [Remote].
type Config struct {
	// Agents are the remote agents, by name ([Parse]).
	Agents []Agent
	// Poll is how often each followed task is read. Defaults to
	// DefaultPoll.
	Poll time.Duration
	// Egress says where calls to the agents may connect (see package
	// egress). The zero Policy takes the port's, whose default refuses
	// loopback, private and link-local addresses unless allowed.
	Egress egress.Policy
	// Logger logs what goes wrong. Optional.
	Logger *zerolog.Logger
}

// Remote follows tasks of remote A2A agents and asks people their
// questions. It is a Background of the service (interlock.Service.Attach).
type Remote struct {
	port   Port
	cfg    Config
	log    zerolog.Logger
	agents map[string]Agent
	egress egress.Policy

	mu       sync.Mutex
	clients  map[string]*a2aclient.Client
	follows  jetstream.KeyValue
	sent     *notify.Sent
	follower *notify.Follower
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// followed is a task followed, as the bucket keeps it.
type followed struct {
	Agent  string `json:"agent"`
	TaskID string `json:"taskId"`
	// By is who asked to follow it, as the HTTP API authenticated them:
	// the asks are theirs, vouched for them. Interlock writes it; no
	// client reads or writes the bucket.
	By protocol.Caller `json:"by"`
}

// origin is what an ask of a remote task keeps of it.
type origin struct {
	Remote *struct {
		Agent     string `json:"agent"`
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	} `json:"a2aRemote"`
}

// New returns the client side of port's Interlock.
func New(port Port, cfg Config) (*Remote, error) {
	if port == nil {
		return nil, errors.New("a2aremote: New needs a Port, such as the *interlock.Service")
	}
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	r := &Remote{port: port, cfg: cfg, log: zerolog.Nop(), agents: map[string]Agent{}, clients: map[string]*a2aclient.Client{}, egress: cfg.Egress}
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	}
	for _, a := range cfg.Agents {
		if !agentName.MatchString(a.Name) {
			return nil, fmt.Errorf("a2aremote: agent name %q: use 1 to 64 of A-Z a-z 0-9 _ -", a.Name)
		}
		r.agents[a.Name] = a
	}
	if r.egress.IsZero() {
		r.egress = port.Egress()
	}
	if err := r.egress.Validate(); err != nil {
		return nil, fmt.Errorf("a2aremote: Config.Egress: %w", err)
	}
	return r, nil
}

// consumerName is the durable consumer of the answered events.
func (r *Remote) consumerName() string { return r.port.Names().Prefix + "-a2a-remote" }

// Start opens the bucket of followed tasks, follows the answered events
// of the asks made of them, and reads the tasks every Poll.
func (r *Remote) Start(ctx context.Context) error {
	js, names := r.port.JetStream(), r.port.Names()
	cfg := jetstream.KeyValueConfig{
		Bucket:      names.A2AFollowBucket(),
		Description: "Interlock's A2A client: the remote agents' tasks it follows",
		History:     1,
		TTL:         KeepFollowed,
		Replicas:    notify.Replicas(ctx, js, names, 0),
		Storage:     jetstream.FileStorage,
	}
	var kv jetstream.KeyValue
	err := bus.Ensure(ctx, "bucket "+names.A2AFollowBucket(), func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("a2aremote: binding bucket %s: %w", names.A2AFollowBucket(), err)
	}
	sent, err := notify.OpenSent(ctx, js, names, 0, 0)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.follows, r.sent = kv, sent
	r.mu.Unlock()
	f, err := notify.Follow(ctx, js, names, notify.Config{Name: r.consumerName(), Description: "Interlock's answers to remote A2A agents",
		Kinds: []string{protocol.EventAnswered}, Flows: []string{protocol.AskFlow},
		AckWait: callTimeout + 30*time.Second, Parallel: 4, Logger: &r.log}, r.deliver)
	if err != nil {
		return err
	}
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.follower, r.cancel = f, cancel
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.poll(work)
	}()
	return nil
}

// Stop stops following and reading.
func (r *Remote) Stop(ctx context.Context) error {
	r.mu.Lock()
	f, cancel := r.follower, r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
	if f != nil {
		return f.Stop(ctx)
	}
	return nil
}

// Follow follows task id of agent, for by, whom a surface authenticated:
// the asks of the task are by's, vouched for them.
func (r *Remote) Follow(ctx context.Context, agent, id string, by protocol.Caller) error {
	if _, ok := r.agents[agent]; !ok {
		return fmt.Errorf("a2aremote: no remote agent %q; the agents are those of --a2a-agents: %s", agent, strings.Join(r.names(), ", "))
	}
	if id == "" || len(id) > 256 || strings.ContainsAny(id, "\x00\r\n") {
		return fmt.Errorf("a2aremote: task id %q: give the id the agent gave its task (1 to 256 characters, one line)", id)
	}
	r.mu.Lock()
	kv := r.follows
	r.mu.Unlock()
	if kv == nil {
		return errors.New("a2aremote: not started")
	}
	b, err := json.Marshal(followed{Agent: agent, TaskID: id, By: by})
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, followKey(agent, id), b)
	return err
}

func (r *Remote) names() []string {
	var out []string
	for n := range r.agents {
		out = append(out, n)
	}
	return out
}

// followKey is the bucket's key of a task: the agent, and a hash of the
// task's id, which may hold any character.
func followKey(agent, id string) string {
	h := sha256.Sum256([]byte(id))
	return agent + "." + hex.EncodeToString(h[:16])
}

// poll reads the followed tasks every Poll until ctx ends.
func (r *Remote) poll(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		r.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollOnce reads each followed task once: a task that settled is no
// longer followed; one that waits on input is asked of people.
func (r *Remote) pollOnce(ctx context.Context) {
	r.mu.Lock()
	kv := r.follows
	r.mu.Unlock()
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			r.log.Warn().Err(err).Msg("a2a: listing the followed tasks")
		}
		return
	}
	for key := range keys.Keys() {
		if ctx.Err() != nil {
			return
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue
		}
		var f followed
		if err := json.Unmarshal(e.Value(), &f); err != nil {
			_ = kv.Delete(ctx, key)
			continue
		}
		if done := r.check(ctx, f); done {
			_ = kv.Delete(ctx, key)
		}
	}
}

// check reads a followed task, asks its question if it waits on one,
// and reports whether it is no longer to follow.
func (r *Remote) check(ctx context.Context, f followed) bool {
	agent, ok := r.agents[f.Agent]
	if !ok {
		r.log.Warn().Str("agent", f.Agent).Msg("a2a: a followed task of an agent no longer configured is no longer followed")
		return true
	}
	cl, err := r.client(ctx, agent)
	if err != nil {
		r.log.Warn().Err(err).Str("agent", f.Agent).Msg("a2a: reaching a remote agent")
		return false
	}
	call, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	task, err := cl.GetTask(call, &a2a.TaskQueryParams{ID: a2a.TaskID(f.TaskID)})
	if errors.Is(err, a2a.ErrTaskNotFound) {
		r.log.Warn().Str("agent", f.Agent).Str("task", f.TaskID).Msg("a2a: the agent has no such task; it is no longer followed")
		return true
	}
	if err != nil {
		r.log.Warn().Err(err).Str("agent", f.Agent).Str("task", f.TaskID).Msg("a2a: reading a followed task")
		return false
	}
	switch task.Status.State {
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		if err := r.ask(ctx, agent, f, task); err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Str("agent", f.Agent).Str("task", f.TaskID).Msg("a2a: asking people a remote agent's question")
		}
		return false
	}
	return task.Status.State.Terminal()
}

// ask puts the task's question to the agent's people, once per
// question: its id derives from the agent, the task and the question's
// message.
func (r *Remote) ask(ctx context.Context, agent Agent, f followed, task *a2a.Task) error {
	text, round := "", "0"
	if m := task.Status.Message; m != nil {
		text, round = textOf(m), m.ID
	} else if ts := task.Status.Timestamp; ts != nil {
		round = ts.UTC().Format(time.RFC3339Nano)
	}
	h := sha256.Sum256([]byte(agent.Name + "\x00" + f.TaskID + "\x00" + round))
	id := askPrefix + hex.EncodeToString(h[:16])
	cl, err := r.port.ClientAs(source, f.By)
	if err != nil {
		return fmt.Errorf("vouching for %s, who follows the task: %w", f.By.Name, err)
	}
	if _, err := cl.Checkpoint(ctx, protocol.AskFlow, id); err == nil {
		return nil // asked already
	}
	if text == "" {
		text = fmt.Sprintf("%s needs input to go on with task %s (%s).", agent.Name, f.TaskID, task.Status.State)
	}
	var o origin
	o.Remote = &struct {
		Agent     string `json:"agent"`
		TaskID    string `json:"taskId"`
		ContextID string `json:"contextId"`
	}{agent.Name, f.TaskID, task.ContextID}
	raw, _ := json.Marshal(o)
	// The card shows the agent's context: which agent, which task, and
	// the conversation it belongs to.
	about, _ := json.Marshal(map[string]string{"agent": agent.Name, "agentUrl": agent.URL, "taskId": f.TaskID,
		"contextId": task.ContextID, "state": string(task.Status.State)})
	req := protocol.AskRequest{AskID: id, Agent: cmp.Or(f.By.Name, agent.Name), ConversationID: task.ContextID, Origin: raw, Context: about,
		Interrupt: interruptOf(agent, f, text, task.Status.State)}
	_, err = cl.AskNoWait(ctx, req, callTimeout)
	if errors.Is(err, client.ErrNoAnswer) {
		return nil // asked; the interrupt is announced later
	}
	return err
}

// textOf is a message's text, its data parts as JSON.
func textOf(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			parts = append(parts, p.Text)
		case a2a.DataPart:
			b, _ := json.Marshal(p.Data)
			parts = append(parts, string(b))
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n\n"))
}

// client is a client of agent, made from its card once, calling it
// through the outbound policy with its token.
func (r *Remote) client(ctx context.Context, agent Agent) (*a2aclient.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cl, ok := r.clients[agent.Name]; ok {
		return cl, nil
	}
	hc := &http.Client{Transport: bearer{token: agent.token, base: r.egress.Transport()}, Timeout: callTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	card, err := agentcard.NewResolver(hc).Resolve(call, agent.URL)
	if err != nil {
		return nil, fmt.Errorf("reading the Agent Card of %s at %s: %w", agent.Name, agent.URL, err)
	}
	cl, err := a2aclient.NewFromCard(call, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("a client of %s: %w", agent.Name, err)
	}
	r.clients[agent.Name] = cl
	return cl, nil
}

// bearer sends a token with every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// deliver sends a settled ask's answer to its remote task: the text
// answered or responded as the task's next message; a rejection cancels
// the task. Once per answered event.
func (r *Remote) deliver(ctx context.Context, d notify.Delivery) error {
	var ans protocol.Answered
	if err := json.Unmarshal(d.Event.Data(), &ans); err != nil {
		return notify.Permanent(fmt.Errorf("decoding answered: %w", err))
	}
	if !strings.HasPrefix(ans.AskID, askPrefix) {
		return nil
	}
	var o origin
	if err := json.Unmarshal(ans.Origin, &o); err != nil || o.Remote == nil {
		return nil
	}
	agent, ok := r.agents[o.Remote.Agent]
	if !ok {
		return notify.Permanent(fmt.Errorf("the answer of %s is for agent %s, which is not configured", ans.AskID, o.Remote.Agent))
	}
	done := "a2a-remote." + d.Event.ID()
	if ok, err := r.sent.Done(ctx, done); err != nil || ok {
		return err
	}
	cl, err := r.client(ctx, agent)
	if err != nil {
		return err
	}
	call, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	id := a2a.TaskID(o.Remote.TaskID)
	switch text, answered := answerText(&ans); {
	case ans.Status != protocol.AskAnswered:
		// Expired or cancelled: the agent's task waits on, for whoever
		// else may answer it.
	case ans.Decision == protocol.VerdictReject:
		if _, err := cl.CancelTask(call, &a2a.TaskIDParams{ID: id}); err != nil && !errors.Is(err, a2a.ErrTaskNotCancelable) {
			return err
		}
	case answered:
		msg := &a2a.Message{ID: "interlock-" + ans.AskID, Role: a2a.MessageRoleUser, TaskID: id, ContextID: o.Remote.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}
		blocking := false
		if _, err := cl.SendMessage(call, &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{Blocking: &blocking}}); err != nil {
			return err
		}
	}
	return r.sent.Mark(ctx, done, o.Remote.Agent+" "+o.Remote.TaskID)
}

// answerText is the text an answer sends the agent.
func answerText(a *protocol.Answered) (string, bool) {
	if a.Decision == protocol.VerdictRespond || a.Message != "" {
		return a.Message, a.Message != ""
	}
	if v, ok := a.Answers["answer"]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s, true
		}
		return string(v), true
	}
	return "", false
}
