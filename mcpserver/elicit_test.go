package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpserver"
	"github.com/interlockhq/interlock/protocol"
)

// user answers the forms an MCP client shows, from a script, and keeps
// the forms it was shown.
type user struct {
	t       testing.TB
	mu      sync.Mutex
	answers []*mcp.ElicitResult
	forms   []*mcp.ElicitParams
}

func (u *user) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forms = append(u.forms, req.Params)
	if len(u.answers) == 0 {
		u.t.Errorf("a form the script does not answer: %s", req.Params.Message)
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	a := u.answers[0]
	u.answers = u.answers[1:]
	return a, nil
}

// shown returns the forms the user was shown.
func (u *user) shown() []*mcp.ElicitParams {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), u.forms...)
}

func accept(content map[string]any) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: content}
}

// connectEliciting connects, to an MCP server on a service of the
// example flows, a client that asks its user forms (it declares the
// elicitation capability).
func connectEliciting(t *testing.T, cfg mcpserver.Config, u *user) *model {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret})
	s, err := mcpserver.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-model", Version: "v0"}, &mcp.ClientOptions{ElicitationHandler: u.elicit})
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

// TestQuestionsAreAskedWithElicitationWhenTheClientCan walks a booking
// whose questions and choice the user answers in forms: a rejected email
// goes back to the model to explain, the other forms carry the user's
// answers to completion, and no form shows hidden context.
func TestQuestionsAreAskedWithElicitationWhenTheClientCan(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		name := "vouched"
		if keep {
			name = "tokens kept by the server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			u := &user{t: t, answers: []*mcp.ElicitResult{accept(args{"email": "not an email"})}}
			m := connectEliciting(t, mcpserver.Config{Flows: flows, KeepTokens: keep}, u)
			var r mcpserver.RunResult
			m.call("start_flow", args{"flow": "booking"}, &r)
			wantFields(t, r, "email")
			if got := r.Interrupt.Questions[0].HiddenContext; !strings.HasPrefix(got, "ERROR: That doesn't look like an email.") {
				t.Fatalf("after the form's rejected email, hidden context %q; want ERROR: for the model to explain", got)
			}
			forms := u.shown()
			if len(forms) != 1 || forms[0].Message != "What's your email?" {
				t.Fatalf("forms %s, want the email question", mustJSON(t, forms))
			}

			// The model asks again in its own words; the user's good
			// email opens the next forms, each answered in turn.
			u.mu.Lock()
			u.answers = []*mcp.ElicitResult{
				accept(args{"name": "Ann", "phone": "+1 555 0100"}),
				accept(args{"level": "Intermediate"}),
				accept(args{"driver.name": "Bob", "driver.license": "D-123"}),
				accept(args{"selected": []any{"product", "design"}}),
			}
			u.mu.Unlock()
			m.call("continue_flow", args{"flow": "booking", "run": r.Run, "stateUpdates": args{"email": "ann@example.com"}}, &r)
			wantStatus(t, r, mcpserver.StatusCompleted)
			if r.State["name"] != "Ann" || r.State["level"] != "intermediate" || mustJSON(t, r.State["topics"]) != `["product","design"]` {
				t.Fatalf("final state %+v", r.State)
			}
			forms = u.shown()
			if len(forms) != 5 {
				t.Fatalf("%d forms, want 5: %s", len(forms), mustJSON(t, forms))
			}
			for _, f := range forms {
				b := mustJSON(t, f)
				if strings.Contains(b, "Ask both in one natural message") || strings.Contains(b, "Politely reject") || strings.Contains(b, "ERROR:") {
					t.Errorf("a form shows hidden context: %s", b)
				}
			}
			if b := mustJSON(t, forms[2].RequestedSchema); !strings.Contains(b, `"description":"For example: beginner, intermediate, advanced"`) {
				t.Errorf("the level's form does not suggest: %s", b)
			}
			if b := mustJSON(t, forms[4].RequestedSchema); !strings.Contains(b, `"type":"array"`) || !strings.Contains(b, `"const":"product"`) {
				t.Errorf("the topics' form is not a multiple choice of the options: %s", b)
			}
		})
	}
}

// TestADeclinedOrCancelledFormLeavesTheRunWaiting: the model hears the
// user did not answer, and the run still waits on its question.
func TestADeclinedOrCancelledFormLeavesTheRunWaiting(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			u := &user{t: t, answers: []*mcp.ElicitResult{{Action: action}}}
			m := connectEliciting(t, mcpserver.Config{Flows: flows}, u)
			var r mcpserver.RunResult
			m.call("start_flow", args{"flow": "booking", "stateUpdates": args{"email": "ann@example.com"}}, &r)
			wantFields(t, r, "name", "phone")
			want := map[string]string{"decline": "declined to answer the form", "cancel": "closed the form without answering"}[action]
			if !strings.Contains(r.Next, want) {
				t.Fatalf("next %q, want it to say the user %s", r.Next, want)
			}
			var info mcpserver.RunInfo
			m.call("get_run", args{"flow": "booking", "run": r.Run}, &info)
			if info.Status != mcpserver.StatusInterrupt || info.Interrupt.RequestID != r.Interrupt.RequestID {
				t.Fatalf("the run %+v, want it waiting on the same question", info)
			}
			// Answered in conversation, the run goes on (with another form).
			u.mu.Lock()
			u.answers = []*mcp.ElicitResult{{Action: "decline"}}
			u.mu.Unlock()
			m.call("continue_flow", args{"flow": "booking", "run": r.Run, "stateUpdates": args{"name": "Ann", "phone": "+1 555 0100"}}, &r)
			wantFields(t, r, "level")
		})
	}
}

// TestAFormsStateReadsOnlyARunTheApproverMayRead: the state of a form
// comes back from the client, which may name any run in it; a declined
// form naming another agent's ask is refused, not answered with what the
// ask waits on.
func TestAFormsStateReadsOnlyARunTheApproverMayRead(t *testing.T) {
	t.Parallel()
	d := mcpDoor{startTrusted(t)}
	ask := authoritytest.RunNamed(authoritytest.Ask)
	_, run := d.Start(t, ask, "ask-form")
	state, err := json.Marshal(map[string]any{"flow": protocol.AskFlow, "run": run, "requestId": "req-any", "kind": "question"})
	if err != nil {
		t.Fatal(err)
	}
	m := d.as(t, authoritytest.AgentB)
	res, err := m.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "continue_flow", Arguments: args{"flow": protocol.AskFlow, "run": run},
		RequestState: base64.RawURLEncoding.EncodeToString(state), InputResponses: mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "decline"}}})
	if err != nil {
		t.Fatal(err)
	}
	if code := refusalOf(t, res); code != protocol.CodeForbidden || strings.Contains(text(res), ask.Pending.Action) {
		t.Fatalf("a declined form naming another's ask: %s, want refused forbidden and nothing of the ask", text(res))
	}
}
