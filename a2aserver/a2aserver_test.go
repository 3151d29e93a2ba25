package a2aserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aserver"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// site is a deployment: a NATS server, and processes of Interlock, each
// serving the HTTP API with the A2A agent on it.
type site struct {
	t *testing.T
	// allow is what push notifications may reach beyond the default
	// outbound policy.
	allow  []string
	srv    *bus.Server
	auth   *httpapi.AuthFile
	live   *people.Live
	tokens map[string]string
}

// callers are the site's directory: two agents and a person of support.
var callers = map[string][]string{"bot": nil, "eve": nil, "ann": {"support"}}

func startSite(t *testing.T) *site {
	t.Helper()
	s := &site{t: t, tokens: map[string]string{}}
	file := filepath.Join(t.TempDir(), "callers.yaml")
	for name, roles := range callers {
		tok, err := httpapi.AddCaller(file, name, roles)
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[name] = tok
	}
	var err error
	if s.auth, err = httpapi.LoadAuth(file); err != nil {
		t.Fatal(err)
	}
	entries, err := httpapi.ReadAuthFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := httpapi.AuthDirectory(entries, file)
	if err != nil {
		t.Fatal(err)
	}
	s.live = people.NewLive(dir)
	s.srv = natstest.StartServer(t, "")
	return s
}

// process starts a process of Interlock, named instance, and returns its
// service and its API's base URL.
func (s *site) process(instance string) (*interlock.Service, string) {
	t := s.t
	t.Helper()
	svc := natstest.StartWith(t, s.srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, People: s.live, Instance: instance})
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: s.auth, People: s.live.Current})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := a2aserver.New(svc, a2aserver.Config{PublicURL: api.PublicURL, Wait: 5 * time.Second, Egress: egress.Policy{Allow: s.allow}})
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
	return svc, api.PublicURL()
}

// bearer sends a caller's token with every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// agent is an A2A client of the official Go SDK, acting as who, made
// from the Agent Card it resolves at base.
func (s *site) agent(base, who string) *a2aclient.Client {
	s.t.Helper()
	return s.agentIn(s.t, base, who)
}

// agentIn is agent, for test t.
func (s *site) agentIn(t *testing.T, base, who string) *a2aclient.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: s.tokens[who], base: tr}}
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Destroy() })
	return cl
}

// api calls the HTTP API as who and returns the status and body.
func (s *site) api(base, who, method, path, body string) (int, string) {
	t := s.t
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+s.tokens[who])
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func noWait() *a2a.MessageSendConfig {
	b := false
	return &a2a.MessageSendConfig{Blocking: &b}
}

// send sends a message and returns the task it made.
func send(t *testing.T, cl *a2aclient.Client, cfg *a2a.MessageSendConfig, parts ...a2a.Part) *a2a.Task {
	t.Helper()
	res, err := cl.SendMessage(t.Context(), &a2a.MessageSendParams{Config: cfg, Message: a2a.NewMessage(a2a.MessageRoleUser, parts...)})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("message/send answered a %T, want a task", res)
	}
	return task
}

// answer has who answer task's ask through the HTTP API.
func (s *site) answer(base, who string, task a2a.TaskID, body string) {
	s.t.Helper()
	if code, out := s.api(base, who, "POST", "/v1/runs/ask/"+string(task)+"/resume", body); code >= 300 || !strings.Contains(out, `"outcome":"completed"`) {
		s.t.Fatalf("%s answering %s: %d %s", who, task, code, out)
	}
}

// answerData is the data part of the task's answer artifact.
func answerData(t *testing.T, task *a2a.Task) map[string]any {
	t.Helper()
	for _, a := range task.Artifacts {
		if a.ID != a2aserver.ArtifactID {
			continue
		}
		for _, p := range a.Parts {
			if d, ok := p.(a2a.DataPart); ok {
				return d.Data
			}
		}
	}
	t.Fatalf("task %s has no answer artifact: %+v", task.ID, task.Artifacts)
	return nil
}

// TestAnAgentsQuestionIsAnsweredByAPersonAndReadBackAsTheTasksArtifact:
// an A2A client of the Go SDK sends a question as text; the task waits
// (working) while a person answers it in Interlock; tasks/get then gives
// the answer as the task's artifact, completed.
func TestAnAgentsQuestionIsAnsweredByAPersonAndReadBackAsTheTasksArtifact(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	bot := s.agent(base, "bot")
	task := send(t, bot, noWait(), a2a.TextPart{Text: "Which warehouse should ship order 7?"})
	if task.Status.State != a2a.TaskStateWorking || task.ContextID == "" {
		t.Fatalf("the task as sent: %s in context %q, want working", task.Status.State, task.ContextID)
	}
	s.answer(base, "ann", task.ID, `{"answers":{"answer":"Leeds"}}`)
	got, err := bot.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted || got.ContextID != task.ContextID {
		t.Fatalf("the task answered: %s in context %q, want completed in %q", got.Status.State, got.ContextID, task.ContextID)
	}
	data := answerData(t, got)
	if answers, _ := data["answers"].(map[string]any); answers["answer"] != "Leeds" || data["receipt"] == "" {
		t.Fatalf("the answer artifact: %v", data)
	}
}

// TestAnApprovalRejectedIsATaskRejectedWithTheSignedReceipt: an approval
// of a tool call sent as a data part is decided by a person of its role;
// a rejection is the task's state rejected, with the decision, the reason
// and the signed receipt in its artifact.
func TestAnApprovalRejectedIsATaskRejectedWithTheSignedReceipt(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	bot := s.agent(base, "bot")
	task := send(t, bot, noWait(), a2a.TextPart{Text: "The customer asks for a full refund."},
		a2a.DataPart{Data: map[string]any{"kind": "approval", "action": "issue_refund", "args": map[string]any{"amount": 4800}, "approverRole": "support"}})
	s.answer(base, "ann", task.ID, `{"decision":"reject","reason":"over the limit"}`)
	got, err := bot.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	data := answerData(t, got)
	if got.Status.State != a2a.TaskStateRejected || data["decision"] != "reject" || data["approver"] != "ann" || data["reason"] != "over the limit" {
		t.Fatalf("the rejected task: %s, answer %v", got.Status.State, data)
	}
	if r, _ := data["receipt"].(string); r == "" {
		t.Fatalf("the answer carries no receipt: %v", data)
	}
}

// TestATaskLivesInJetStreamNotInAProcess: the process that took the
// message stops before anyone answers; another process, which never saw
// the message, answers tasks/get and a resubscription with the answer.
func TestATaskLivesInJetStreamNotInAProcess(t *testing.T) {
	s := startSite(t)
	first, base := s.process("one")
	task := send(t, s.agent(base, "bot"), noWait(), a2a.TextPart{Text: "May I close ticket 12?"})
	if err := first.Stop(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	_, other := s.process("two")
	s.answer(other, "ann", task.ID, `{"answers":{"answer":"yes"}}`)
	bot := s.agent(other, "bot")
	got, err := bot.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the task read on another process: %s, want completed", got.Status.State)
	}
	var last a2a.Event
	for ev, err := range bot.ResubscribeToTask(t.Context(), &a2a.TaskIDParams{ID: task.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if tk, ok := last.(*a2a.Task); !ok || tk.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("resubscribing to a settled task ended with %#v, want the task, completed", last)
	}
}

// TestAStreamFollowsTheTaskUntilAPersonAnswers: message/stream gives the
// task, then the answer artifact and the final status once a person
// answers.
func TestAStreamFollowsTheTaskUntilAPersonAnswers(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	bot := s.agent(base, "bot")
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "Ship to the new address?"})
	var kinds []string
	var final *a2a.TaskStatusUpdateEvent
	answered := false
	for ev, err := range bot.SendStreamingMessage(t.Context(), &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task:"+string(ev.Status.State))
			if !answered {
				answered = true
				s.answer(base, "ann", ev.ID, `{"answers":{"answer":"no"}}`)
			}
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact:"+string(ev.Artifact.ID))
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(ev.Status.State))
			if ev.Final {
				final = ev
			}
		}
	}
	if got := strings.Join(kinds, " "); got != "task:working artifact:answer status:completed" || final == nil {
		t.Fatalf("the stream: %s, want task:working artifact:answer status:completed, the last final", got)
	}
}

// TestACancelledTaskIsCanceledAndCannotBeCancelledAgain: tasks/cancel
// cancels the ask; a second cancel is refused as not cancelable.
func TestACancelledTaskIsCanceledAndCannotBeCancelledAgain(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	bot := s.agent(base, "bot")
	task := send(t, bot, noWait(), a2a.TextPart{Text: "Restart the cluster?"})
	got, err := bot.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the cancelled task: %s, want canceled", got.Status.State)
	}
	if _, err := bot.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("cancelling again: %v, want task not cancelable", err)
	}
}

// TestAnotherAgentNeitherSeesNorCancelsATask: eve, another agent, who may
// not decide bot's approval, is told bot's task does not exist, on
// tasks/get, tasks/cancel and tasks/resubscribe; the task waits on,
// untouched. (The one authority decides: a question anyone may answer is
// read by anyone who may answer it.)
func TestAnotherAgentNeitherSeesNorCancelsATask(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	task := send(t, s.agent(base, "bot"), noWait(), a2a.DataPart{Data: map[string]any{"kind": "approval", "action": "delete_backups", "approverRole": "support"}})
	eve := s.agent(base, "eve")
	if _, err := eve.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("eve reading bot's task: %v, want task not found", err)
	}
	if _, err := eve.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("eve cancelling bot's task: %v, want task not found", err)
	}
	for _, err := range eve.ResubscribeToTask(t.Context(), &a2a.TaskIDParams{ID: task.ID}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("eve resubscribing to bot's task: %v, want task not found", err)
		}
	}
	got, err := s.agent(base, "bot").GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("bot's task after eve tried: %v, %v; want it working", got, err)
	}
}

// TestTheSameMessageSentTwiceIsOneTask: a client that sends a message
// again (a retry) gets the same task, and people are asked once; the same
// message id from another agent is another task.
func TestTheSameMessageSentTwiceIsOneTask(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	sendAs := func(who string) *a2a.Task {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "Approve the invoice?"})
		msg.ID = "msg-1"
		res, err := s.agent(base, who).SendMessage(t.Context(), &a2a.MessageSendParams{Config: noWait(), Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task)
	}
	first, again, eves := sendAs("bot"), sendAs("bot"), sendAs("eve")
	if again.ID != first.ID || eves.ID == first.ID {
		t.Fatalf("tasks %s, %s (bot twice), %s (eve): want bot's the same, eve's another", first.ID, again.ID, eves.ID)
	}
	code, body := s.api(base, "ann", "GET", "/v1/interrupts", "")
	if code != http.StatusOK || strings.Count(body, string(first.ID)) != 1 {
		t.Fatalf("the pending interrupts (%d): %s; want bot's ask once", code, body)
	}
}

// TestTheAgentCardSaysHowToReachAndAuthenticate: the card is public and
// names the endpoint on the API's URL, the three skills, streaming, and
// the bearer scheme.
func TestTheAgentCardSaysHowToReachAndAuthenticate(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	code, body := s.api(base, "", "GET", a2aserver.CardPath, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s without a token: %d %s", a2aserver.CardPath, code, body)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal([]byte(body), &card); err != nil {
		t.Fatal(err)
	}
	var skills []string
	for _, sk := range card.Skills {
		skills = append(skills, sk.ID)
	}
	if card.URL != base+a2aserver.Path || !card.Capabilities.Streaming || strings.Join(skills, " ") != "question choice approval" {
		t.Fatalf("the card: url %s, streaming %v, skills %v", card.URL, card.Capabilities.Streaming, skills)
	}
	if sch, ok := card.SecuritySchemes["bearer"].(a2a.HTTPAuthSecurityScheme); !ok || sch.Scheme != "Bearer" || len(card.Security) != 1 {
		t.Fatalf("the card's security: %#v %v", card.SecuritySchemes, card.Security)
	}
}

// TestTheEndpointRefusesWhatItCannotTakeSayingWhy: no token, a wrong
// one, or a body of another type is refused before any method runs;
// messages Interlock cannot make an ask of are refused with what to send
// instead, and nothing is asked.
func TestTheEndpointRefusesWhatItCannotTakeSayingWhy(t *testing.T) {
	s := startSite(t)
	_, base := s.process("one")
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}`
	if code, body := s.api(base, "", "POST", a2aserver.Path, send); code != http.StatusUnauthorized || !strings.Contains(body, "Bearer") {
		t.Errorf("no token: %d %s, want 401 saying to send a bearer token", code, body)
	}
	s.tokens["nobody"] = "not-a-token"
	if code, _ := s.api(base, "nobody", "POST", a2aserver.Path, send); code != http.StatusUnauthorized {
		t.Errorf("an unknown token: %d, want 401", code)
	}
	for _, c := range []struct{ name, params, says string }{
		{"no message", `{}`, "params.message is missing"},
		{"no message id", `{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}`, "messageId is empty"},
		{"nothing to ask", `{"message":{"role":"user","messageId":"m1","parts":[]}}`, "no text and no data part"},
		{"a file", `{"message":{"role":"user","messageId":"m2","parts":[{"kind":"file","file":{"uri":"https://example.com/a.pdf"}}]}}`, "part 0 is a"},
		{"two data parts", `{"message":{"role":"user","messageId":"m3","parts":[{"kind":"data","data":{"kind":"question"}},{"kind":"data","data":{}}]}}`, "second data part"},
		{"an unknown kind", `{"message":{"role":"user","messageId":"m4","parts":[{"kind":"data","data":{"kind":"poll"}}]}}`, "poll"},
		{"a task id", `{"message":{"role":"user","messageId":"m5","taskId":"a2a-x","parts":[{"kind":"text","text":"more"}]}}`, "take one message each"},
		{"a push to a private address", `{"configuration":{"pushNotificationConfig":{"url":"http://10.0.0.1/hook"}},"message":{"role":"user","messageId":"m6","parts":[{"kind":"text","text":"hi"}]}}`, "a private address"},
		{"a push URL of another scheme", `{"configuration":{"pushNotificationConfig":{"url":"file:///etc/passwd"}},"message":{"role":"user","messageId":"m7","parts":[{"kind":"text","text":"hi"}]}}`, "absolute http or https URL"},
	} {
		body := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":` + c.params + `}`
		code, out := s.api(base, "bot", "POST", a2aserver.Path, body)
		var res struct {
			Error *struct {
				Code int `json:"code"`
				Data struct {
					Error string `json:"error"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != http.StatusOK || res.Error == nil || !strings.Contains(res.Error.Data.Error, c.says) {
			t.Errorf("%s: %d %s; want a JSON-RPC error saying %q", c.name, code, out, c.says)
		}
	}
	if code, _ := s.api(base, "bot", "POST", a2aserver.Path, "{not json"); code != http.StatusOK {
		t.Errorf("a body not JSON: %d, want a JSON-RPC parse error", code)
	}
	if code, body := s.api(base, "ann", "GET", "/v1/interrupts", ""); code != http.StatusOK || strings.Contains(body, "a2a-") {
		t.Errorf("refused messages asked people something: %s", body)
	}
	_ = fmt.Sprint
}

// pushed is a push notification a receiver got.
type pushed struct {
	token, auth string
	task        a2a.Task
}

// receiver is a client's push-notification receiver on loopback.
func receiver(t *testing.T) (string, <-chan pushed) {
	t.Helper()
	got := make(chan pushed, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pushed{token: r.Header.Get(a2aserver.HeaderToken), auth: r.Header.Get("Authorization")}
		if err := json.NewDecoder(r.Body).Decode(&p.task); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- p
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// TestASettledTaskIsPushedToTheReceiverItsClientSet: a client sets a
// push-notification configuration with its message, and another with
// tasks/pushNotificationConfig/set; it lists, reads and deletes them.
// Once a person answers, Interlock POSTs the task, completed with its
// answer, to the receiver of each configuration left, with its token and
// credentials. Another agent sees none of the configurations (their
// tokens are the client's).
func TestASettledTaskIsPushedToTheReceiverItsClientSet(t *testing.T) {
	s := startSite(t)
	s.allow = []string{"127.0.0.1"}
	_, base := s.process("one")
	url, got := receiver(t)
	bot := s.agent(base, "bot")
	cfg := noWait()
	cfg.PushConfig = &a2a.PushConfig{ID: "first", URL: url, Token: "tok-first"}
	task := send(t, bot, cfg, a2a.TextPart{Text: "Refund order 7?"})

	ctx := t.Context()
	for _, c := range []a2a.PushConfig{
		{ID: "second", URL: url, Token: "tok-second", Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "cred-second"}},
		{ID: "third", URL: url, Token: "tok-third"},
	} {
		if _, err := bot.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: c}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bot.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "third"}); err != nil {
		t.Fatal(err)
	}
	list, err := bot.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("the configurations listed: %v, %v; want first and second", list, err)
	}
	if c, err := bot.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "second"}); err != nil || c.Config.Token != "tok-second" {
		t.Fatalf("reading configuration second: %+v, %v", c, err)
	}
	if list, err := s.agent(base, "eve").ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(list) != 0 {
		t.Fatalf("eve listing bot's configurations: %v, %v; want none", list, err)
	}

	s.answer(base, "ann", task.ID, `{"answers":{"answer":"yes"}}`)
	seen := map[string]pushed{}
	for len(seen) < 2 {
		select {
		case p := <-got:
			if _, twice := seen[p.token]; twice {
				t.Fatalf("configuration %s notified twice", p.token)
			}
			seen[p.token] = p
		case <-time.After(natstest.Wait):
			t.Fatalf("the receiver got %d notifications, want 2", len(seen))
		}
	}
	first, second := seen["tok-first"], seen["tok-second"]
	if first.task.ID != task.ID || first.task.Status.State != a2a.TaskStateCompleted || answerData(t, &first.task)["answers"] == nil {
		t.Fatalf("the notification of first: %+v", first.task)
	}
	if second.auth != "Bearer cred-second" || first.auth != "" {
		t.Fatalf("credentials sent: first %q, second %q", first.auth, second.auth)
	}
	if _, ok := seen["tok-third"]; ok {
		t.Fatal("a deleted configuration was notified")
	}
}
