package a2aserver_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aserver"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheA2AAgentAnswersTheConformanceTable runs the table's reads and
// cancels of asks through the A2A agent, each ask sent to it as a
// message by the agent that asks: the one authority answers A2A callers
// as it answers every other surface's.
func TestTheA2AAgentAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	tokens := map[string]string{}
	dir := authoritytest.Directory(func(p authoritytest.Person) people.Person {
		tokens[p.Name] = people.NewToken()
		return people.Person{Name: p.Name, Roles: p.Roles, TokenSHA256: people.HashToken(tokens[p.Name])}
	})
	cfg := authoritytest.Deploy(interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret}, dir)
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), cfg)
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", People: cfg.People.Current})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := a2aserver.New(svc, a2aserver.Config{PublicURL: api.PublicURL, Wait: natstest.Wait})
	if err != nil {
		t.Fatal(err)
	}
	agent.Register(api)
	if err := svc.Attach(t.Context(), agent); err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, tokens: tokens}
	authoritytest.Conform(t, authoritytest.SurfaceA2A, a2aDoor{s: s, svc: svc, base: api.PublicURL()})
}

// a2aDoor is the A2A agent as the table's door.
type a2aDoor struct {
	s    *site
	svc  *interlock.Service
	base string
}

// Start sends run r's ask as a message of the agent that asks, its
// interrupt a data part, and returns the task's ask.
func (d a2aDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	req := r.AskRequest(id)
	if req == nil {
		t.Fatalf("the A2A agent makes asks only, not %s", r.Key)
	}
	b, err := json.Marshal(req.Interrupt)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: data})
	msg.ID = id
	res, err := d.s.agentIn(t, d.base, r.StartedBy).SendMessage(t.Context(), &a2a.MessageSendParams{Config: noWait(), Message: msg})
	if err != nil {
		t.Fatalf("%s sending %s: %v", r.StartedBy, id, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("%s's message %s: %#v, want a task waiting for a person", r.StartedBy, id, res)
	}
	return protocol.AskFlow, string(task.ID)
}

// code is the refusal's code an error of the agent words: (forbidden).
var code = regexp.MustCompile(`\(([a-z_]+)\)`)

// Ask sends the case's tasks/get or tasks/cancel as its caller. A task
// the caller may not read does not exist for it: that is the refusal
// forbidden, said as A2A says it. A cancel acknowledged must have
// cancelled the ask.
func (d a2aDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	cl := d.s.agentIn(t, d.base, c.Who)
	var err error
	switch c.Action {
	case authority.Read:
		_, err = cl.GetTask(t.Context(), &a2a.TaskQueryParams{ID: a2a.TaskID(run)})
	case authority.Cancel:
		var task *a2a.Task
		if task, err = cl.CancelTask(t.Context(), &a2a.TaskIDParams{ID: a2a.TaskID(run)}); err == nil && task.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("tasks/cancel of %s acknowledged, but the task is %s", run, task.Status.State)
		}
	default:
		t.Fatalf("the A2A door has no %s", c.Action)
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, a2a.ErrTaskNotFound):
		return protocol.CodeForbidden
	case errors.Is(err, a2a.ErrTaskNotCancelable):
		if m := code.FindStringSubmatch(err.Error()); m != nil {
			return protocol.Code(m[1])
		}
	}
	t.Fatalf("%s asking to %s on %s: %v, neither allowed nor refused", c.Who, c.Action, run, err)
	return ""
}
