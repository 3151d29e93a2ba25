package a2aremote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aremote"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// refunder is a remote agent, on the official Go SDK's server: a task's
// first message asks whether to refund (input-required); the next one
// ends the task with what it was told.
type refunder struct{}

func (refunder) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		task := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID}
		task.Status = a2a.TaskStatus{State: a2a.TaskStateInputRequired,
			Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.TextPart{Text: "Refund 4800 to order 7? Reply yes or no."})}
		return q.Write(ctx, task)
	}
	var said []string
	for _, p := range rc.Message.Parts {
		if t, ok := p.(a2a.TextPart); ok {
			said = append(said, t.Text)
		}
	}
	done := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID}
	return q.Write(ctx, &a2a.TaskStatusUpdateEvent{TaskID: rc.TaskID, ContextID: rc.ContextID, Final: true,
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, done, a2a.TextPart{Text: "Told: " + strings.Join(said, " ")})}})
}

func (refunder) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, &a2a.TaskStatusUpdateEvent{TaskID: rc.TaskID, ContextID: rc.ContextID, Final: true,
		Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}})
}

// remoteToken is the bearer token the remote agent takes.
const remoteToken = "remote-agent-token"

// startRemote serves the remote agent on loopback, for callers with its
// token only, and returns its base URL and a client of it.
func startRemote(t *testing.T) (string, *a2aclient.Client) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+remoteToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: "Refunds", Description: "refunds orders", URL: srv.URL + "/invoke", Version: "1",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []a2a.AgentSkill{}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(refunder{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+remoteToken)
		return tr.RoundTrip(r)
	})}
	cl, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Destroy() })
	return srv.URL, cl
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startInterlock runs Interlock with the remote agent named billing,
// answered by agent's people, and returns its API's base URL.
func startInterlock(t *testing.T, remoteURL string, agent a2aremote.Agent) string {
	t.Helper()
	return startInterlockWith(t, remoteURL, agent, nil)
}

// startInterlockWith is startInterlock with a directory of people in
// force, when live is set.
func startInterlockWith(t *testing.T, remoteURL string, agent a2aremote.Agent, live *people.Live) string {
	t.Helper()
	svc := natstest.StartWith(t, natstest.StartServer(t, ""), interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, People: live})
	file := fmt.Sprintf("agents:\n  - name: billing\n    url: %s\n    tokenEnv: BILLING_TOKEN\n", remoteURL)
	if agent.ApproverRole != "" {
		file += "    approverRole: " + agent.ApproverRole + "\n"
	}
	agents, err := a2aremote.Parse([]byte(file), "agents.yaml", func(k string) string {
		if k == "BILLING_TOKEN" {
			return remoteToken
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a2aremote.New(svc, a2aremote.Config{Agents: agents, Poll: 50 * time.Millisecond, Egress: egress.Policy{Allow: []string{"127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	hcfg := httpapi.Config{Addr: "127.0.0.1:0"}
	if live != nil {
		hcfg.People = live.Current
	}
	api, err := httpapi.New(svc, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(svc, inbox.Config{People: hcfg.People})
	if err != nil {
		t.Fatal(err)
	}
	in.Register(api)
	r.Register(api)
	if err := svc.Attach(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	return api.PublicURL()
}

// call calls Interlock's API and returns the status and body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	return callAs(t, "", method, url, body)
}

// callAs is call with token as the bearer token ("" for none).
func callAs(t *testing.T, token, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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

// pendingAsk waits for the ask of the remote task and returns its id and
// interrupt.
func pendingAsk(t *testing.T, base string) (string, map[string]any) {
	t.Helper()
	var id string
	var in map[string]any
	var mu sync.Mutex
	natstest.Eventually(t, "the remote agent's question asked", func() bool {
		_, body := call(t, "GET", base+"/v1/interrupts?flow=ask", "")
		var list struct {
			Items []map[string]any `json:"items"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, it := range list.Items {
			if run, _ := it["run"].(string); strings.HasPrefix(run, "a2r-") {
				mu.Lock()
				id, in = run, it
				mu.Unlock()
				return true
			}
		}
		return false
	})
	return id, in
}

// remoteState waits for the remote task to reach state, and returns it.
func remoteState(t *testing.T, cl *a2aclient.Client, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	var task *a2a.Task
	natstest.Eventually(t, "the remote task "+string(state), func() bool {
		got, err := cl.GetTask(t.Context(), &a2a.TaskQueryParams{ID: id})
		task = got
		return err == nil && got.Status.State == state
	})
	return task
}

// startTask has the remote agent start a task, which waits on input.
func startTask(t *testing.T, cl *a2aclient.Client) *a2a.Task {
	t.Helper()
	res, err := cl.SendMessage(t.Context(), &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "Refund order 7"})})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the remote agent answered %#v, want a task waiting on input", res)
	}
	return task
}

// TestARemoteAgentsQuestionIsAnsweredByAPersonThroughInterlock: a task
// of a remote agent (the official Go SDK's server) waits on input;
// Interlock follows it, asks the agent's question of the people of its
// role, with the agent's context on the card, and sends the answer a
// person responds with in the inbox as the task's next message; the
// agent finishes the task with it.
func TestARemoteAgentsQuestionIsAnsweredByAPersonThroughInterlock(t *testing.T) {
	url, remote := startRemote(t)
	base := startInterlock(t, url, a2aremote.Agent{ApproverRole: "support"})
	task := startTask(t, remote)
	if code, body := call(t, "POST", base+a2aremote.FollowPath, `{"agent":"billing","taskId":"`+string(task.ID)+`"}`); code != http.StatusAccepted {
		t.Fatalf("following the task: %d %s", code, body)
	}
	id, in := pendingAsk(t, base)
	if in["approverRole"] != "support" || in["title"] != "billing asks" || !strings.Contains(fmt.Sprint(in["keyArgs"]), string(task.ID)) {
		t.Fatalf("the ask of the agent's question: %v", in)
	}
	if _, run := call(t, "GET", base+"/v1/runs/ask/"+id, ""); !strings.Contains(run, "Refund 4800 to order 7?") || !strings.Contains(run, `"contextId":"`+task.ContextID+`"`) {
		t.Fatalf("the ask does not show the agent's question and context: %s", run)
	}
	respondInTheInbox(t, base, id, "yes, refund it", "Refund 4800 to order 7?", task.ContextID)
	done := remoteState(t, remote, task.ID, a2a.TaskStateCompleted)
	if m := done.Status.Message; m == nil || !strings.Contains(fmt.Sprint(m.Parts), "Told: yes, refund it") {
		t.Fatalf("the remote task ended with %+v, want it told the person's answer", done.Status)
	}
}

// TestARejectedQuestionCancelsTheRemoteTask: a person of the role
// rejects the agent's question; Interlock cancels the remote task.
func TestARejectedQuestionCancelsTheRemoteTask(t *testing.T) {
	url, remote := startRemote(t)
	base := startInterlock(t, url, a2aremote.Agent{ApproverRole: "support"})
	task := startTask(t, remote)
	if code, body := call(t, "POST", base+a2aremote.FollowPath, `{"agent":"billing","taskId":"`+string(task.ID)+`"}`); code != http.StatusAccepted {
		t.Fatalf("following the task: %d %s", code, body)
	}
	id, _ := pendingAsk(t, base)
	if code, body := call(t, "POST", base+"/v1/runs/ask/"+id+"/resume", `{"decision":"reject","reason":"not without the order number"}`); code >= 300 {
		t.Fatalf("rejecting: %d %s", code, body)
	}
	remoteState(t, remote, task.ID, a2a.TaskStateCanceled)
}

// TestFollowingRefusesWhatItCannotFollowSayingWhy: an agent not
// configured, an empty task id, and a body of other fields are refused
// with what to send instead.
func TestFollowingRefusesWhatItCannotFollowSayingWhy(t *testing.T) {
	url, _ := startRemote(t)
	base := startInterlock(t, url, a2aremote.Agent{})
	for body, says := range map[string]string{
		`{"agent":"crm","taskId":"t-1"}`:      `no remote agent "crm"`,
		`{"agent":"billing","taskId":""}`:     "give the id the agent gave its task",
		`{"agent":"billing","task":"t-1"}`:    `the body is {"agent"`,
		`{"agent":"billing","taskId":"a\nb"}`: "one line",
	} {
		code, got := call(t, "POST", base+a2aremote.FollowPath, body)
		var p struct {
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal([]byte(got), &p); err != nil || code != http.StatusBadRequest || !strings.Contains(p.Detail, says) {
			t.Errorf("following %s: %d %s; want 400 saying %q", body, code, got, says)
		}
	}
}

// TestTheAgentsFileIsCheckedWhenRead: names, URLs and token variables
// are checked when the file is read, each problem said with its agent.
func TestTheAgentsFileIsCheckedWhenRead(t *testing.T) {
	for file, says := range map[string]string{
		"agents:\n  - name: bad name\n    url: https://a.example.com\n":                                       "use 1 to 64",
		"agents:\n  - name: a\n    url: ftp://a.example.com\n":                                                "use the agent's base URL",
		"agents:\n  - name: a\n    url: https://u:p@a.example.com\n":                                          "without user or password",
		"agents:\n  - name: a\n    url: https://a.example.com\n    tokenEnv: NOPE\n":                          "tokenEnv NOPE is not set",
		"agents:\n  - name: a\n    url: https://a.example.com\n    colour: red\n":                             "field colour not found",
		"agents:\n  - name: a\n    url: https://a.example.com\n  - name: a\n    url: https://b.example.com\n": "names another agent too",
	} {
		if _, err := a2aremote.Parse([]byte(file), "agents.yaml", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("reading %q: %v; want an error saying %q", file, err, says)
		}
	}
}

// TestAnAgentThatNamesNoOneIsAnsweredAsAQuestion: an agent whose entry
// names no role and no one has its questions asked as questions, which
// anyone may answer; the answer goes to the agent.
func TestAnAgentThatNamesNoOneIsAnsweredAsAQuestion(t *testing.T) {
	url, remote := startRemote(t)
	base := startInterlock(t, url, a2aremote.Agent{})
	task := startTask(t, remote)
	if code, body := call(t, "POST", base+a2aremote.FollowPath, `{"agent":"billing","taskId":"`+string(task.ID)+`"}`); code != http.StatusAccepted {
		t.Fatalf("following the task: %d %s", code, body)
	}
	id, in := pendingAsk(t, base)
	if in["kind"] != "question" {
		t.Fatalf("the ask: %v, want a question", in)
	}
	if code, body := call(t, "POST", base+"/v1/runs/ask/"+id+"/resume", `{"answers":{"answer":"no"}}`); code >= 300 {
		t.Fatalf("answering: %d %s", code, body)
	}
	done := remoteState(t, remote, task.ID, a2a.TaskStateCompleted)
	if m := done.Status.Message; m == nil || !strings.Contains(fmt.Sprint(m.Parts), "Told: no") {
		t.Fatalf("the remote task ended with %+v", done.Status)
	}
}

// hiddenField is a hidden field of the inbox's forms.
var hiddenField = regexp.MustCompile(`name="(csrf|requestId|key)" value="([^"]*)"`)

// respondInTheInbox answers ask id with message on its page in the inbox,
// as the local user would in a browser: the page's respond form. The page
// must show each of shows.
func respondInTheInbox(t *testing.T, base, id, message string, shows ...string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{DisableKeepAlives: true}
	hc := &http.Client{Jar: jar, Transport: tr}
	res, err := hc.Get(base + "/runs/ask/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(page), "data-respond") {
		t.Fatalf("the ask's page in the inbox offers no response to the agent's question:\n%s", page)
	}
	for _, want := range shows {
		if !strings.Contains(string(page), want) {
			t.Fatalf("the ask's page in the inbox does not show %q:\n%s", want, page)
		}
	}
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(string(page), -1) {
		if form.Get(m[1]) == "" {
			form.Set(m[1], m[2])
		}
	}
	form.Set("decision", "respond")
	form.Set("message", message)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/runs/ask/"+id, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(out), `data-status="completed"`) {
		t.Fatalf("responding in the inbox: %d\n%s", res.StatusCode, out)
	}
}

// TestTheAsksOfAFollowedTaskAreTheFollowersVouchedForThem: with a
// directory of people, the agent that follows a remote task is the
// requester of the asks it brings (vouched, as the API authenticated it,
// not a name taken at its word), so the one authority keeps it from
// answering them itself; a person of the agent's role answers.
func TestTheAsksOfAFollowedTaskAreTheFollowersVouchedForThem(t *testing.T) {
	url, remote := startRemote(t)
	tokens := map[string]string{"bot": people.NewToken(), "ann": people.NewToken()}
	dir, err := people.New("people.yaml", []people.Person{
		{Name: "bot", TokenSHA256: people.HashToken(tokens["bot"])},
		{Name: "ann", Roles: []string{"support"}, TokenSHA256: people.HashToken(tokens["ann"])},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := startInterlockWith(t, url, a2aremote.Agent{ApproverRole: "support"}, people.NewLive(dir))
	task := startTask(t, remote)
	if code, body := call(t, "POST", base+a2aremote.FollowPath, `{"agent":"billing","taskId":"`+string(task.ID)+`"}`); code != http.StatusUnauthorized {
		t.Fatalf("following without a token: %d %s, want 401", code, body)
	}
	if code, body := callAs(t, tokens["bot"], "POST", base+a2aremote.FollowPath, `{"agent":"billing","taskId":"`+string(task.ID)+`"}`); code != http.StatusAccepted {
		t.Fatalf("bot following the task: %d %s", code, body)
	}
	var id string
	natstest.Eventually(t, "the remote agent's question asked", func() bool {
		_, body := callAs(t, tokens["ann"], "GET", base+"/v1/interrupts?flow=ask", "")
		var list struct {
			Items []map[string]any `json:"items"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, it := range list.Items {
			if run, _ := it["run"].(string); strings.HasPrefix(run, "a2r-") {
				if it["requester"] != "bot" || it["startedBy"] != "bot" {
					t.Fatalf("the ask's requester %v, started by %v; want bot, vouched", it["requester"], it["startedBy"])
				}
				id = run
				return true
			}
		}
		return false
	})
	if code, body := callAs(t, tokens["bot"], "POST", base+"/v1/runs/ask/"+id+"/resume", `{"decision":"respond","message":"yes"}`); code != http.StatusForbidden {
		t.Fatalf("bot answering the ask it brought: %d %s, want 403", code, body)
	}
	if code, body := callAs(t, tokens["ann"], "POST", base+"/v1/runs/ask/"+id+"/resume", `{"decision":"respond","message":"yes, refund it"}`); code >= 300 {
		t.Fatalf("ann responding: %d %s", code, body)
	}
	remoteState(t, remote, task.ID, a2a.TaskStateCompleted)
}
