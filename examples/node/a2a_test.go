//go:build unix

package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aserver"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
)

// a2aLine is a line a2a.js prints.
type a2aLine struct {
	Step   string         `json:"step"`
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Data   map[string]any `json:"data"`
	Answer map[string]any `json:"answer"`
}

// serveA2A starts a process of Interlock on srv, named instance, with the
// HTTP API and its A2A agent, and returns it and the API's base URL.
func serveA2A(t *testing.T, srv *bus.Server, instance string) (*interlock.Service, string) {
	t.Helper()
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, Instance: instance})
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0"})
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
	return svc, api.PublicURL()
}

// answerAsk answers the question of ask id, as a person would in the
// inbox, over the HTTP API at base.
func answerAsk(t *testing.T, base, id, answer string) {
	t.Helper()
	body := `{"answers":{"answer":` + quote(answer) + `}}`
	res, err := http.Post(base+"/v1/runs/ask/"+id+"/resume", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 || !strings.Contains(string(b), `"outcome":"completed"`) {
		t.Fatalf("answering %s: %d %s", id, res.StatusCode, b)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// line reads the script's next line, which must be step.
func line(t *testing.T, p *proc, step string) a2aLine {
	t.Helper()
	raw := p.next(t)
	var l a2aLine
	if err := json.Unmarshal([]byte(raw), &l); err != nil || l.Step != step {
		t.Fatalf("%s printed %q, want its step %s (%v)\nstderr:\n%s", p.name, raw, step, err, p.stderr.String())
	}
	return l
}

// TestAnA2AClientOfTheJavaScriptSDKAsksAPersonThroughInterlock: a2a.js,
// on the official A2A JavaScript SDK, streams a question to Interlock's
// A2A agent, and gets the person's answer and the final state once they
// answer. Then it sends a question; Interlock, its NATS server included,
// stops and starts again on the same data; the person answers on the new
// process, and the script's tasks/get, there, reads the answer.
func TestAnA2AClientOfTheJavaScriptSDKAsksAPersonThroughInterlock(t *testing.T) {
	node := requireNode(t)
	dir := t.TempDir()
	srv := natstest.StartServer(t, dir)
	svc, base := serveA2A(t, srv, "one")

	stream := start(t, node, "a2a.js", append(os.Environ(), "INTERLOCK_URL="+base), "stream", "Which warehouse should ship order 7?")
	task := line(t, stream, "task")
	if task.State != "working" || !strings.HasPrefix(task.ID, "a2a-") {
		t.Fatalf("the streamed task: %+v, want an ask waiting for a person", task)
	}
	answerAsk(t, base, task.ID, "Leeds")
	if got := line(t, stream, "answer"); got.Data["receipt"] == nil || got.Data["answers"].(map[string]any)["answer"] != "Leeds" {
		t.Fatalf("the streamed answer: %v", got.Data)
	}
	if got := line(t, stream, "done"); got.State != "completed" {
		t.Fatalf("the stream ended %s, want completed", got.State)
	}
	if err := stream.wait(t); err != nil {
		t.Fatalf("a2a.js stream: %v\nstderr:\n%s", err, stream.stderr.String())
	}

	send := start(t, node, "a2a.js", append(os.Environ(), "INTERLOCK_URL="+base), "send", "May I close ticket 12?")
	sent := line(t, send, "task")
	if err := send.wait(t); err != nil || sent.State != "working" {
		t.Fatalf("a2a.js send: %+v, %v\nstderr:\n%s", sent, err, send.stderr.String())
	}
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	_, again := serveA2A(t, natstest.StartServer(t, dir), "two")
	answerAsk(t, again, sent.ID, "yes")
	get := start(t, node, "a2a.js", append(os.Environ(), "INTERLOCK_URL="+again), "get", sent.ID)
	got := line(t, get, "task")
	if err := get.wait(t); err != nil || got.State != "completed" || got.Answer["answers"].(map[string]any)["answer"] != "yes" {
		t.Fatalf("a2a.js get after the restart: %+v, %v\nstderr:\n%s", got, err, get.stderr.String())
	}
}
