package slackbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/slackbridge"
)

// TestSlackPassesTheChannelSuite: the bridge is a channel of the seam
// that posts to roles' channels only, against a fake of Slack's Web API.
func TestSlackPassesTheChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{
		Name:     slackbridge.Name,
		Features: channeltest.Features{RolesOnly: true, RetryAfter: true, Settle: true},
		New: func(t *testing.T) channeltest.Remote {
			w := &webAPI{t: t, runs: map[string]string{}}
			w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
			t.Cleanup(w.srv.Close)
			t.Cleanup(w.answers.Release)
			return w
		},
	})
}

// webAPI is the suite's Slack: chat.postMessage and chat.update, each
// channel answering as the suite says.
type webAPI struct {
	t   *testing.T
	srv *httptest.Server

	answers  channeltest.Answers
	mu       sync.Mutex
	ts       int
	runs     map[string]string // ts of a message → flow/run
	received []channeltest.Received
}

func (w *webAPI) Reach(_ *testing.T, _ *interlock.Service, person string) (string, string) {
	// A person's Slack user, mentioned in reminders; the bridge posts to
	// channels.
	return "U" + strings.ToUpper(person), ""
}

func (w *webAPI) RoleAddress(role string) string { return "C" + strings.ToUpper(role) }

func (w *webAPI) Start(t *testing.T, svc *interlock.Service, d notify.Dispatch) func() {
	t.Helper()
	b, err := slackbridge.New(svc, slackbridge.Config{Token: "xoxb-test", SigningSecret: secret, Addr: "127.0.0.1:0",
		APIURL: w.srv.URL + "/api/", Egress: fakeSlackAllowed, People: d.Directory,
		FirstRetry: d.FirstRetry, MaxRetry: d.MaxRetry, Logger: d.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func() { _ = b.Stop(context.WithoutCancel(t.Context())) }
}

func (w *webAPI) Received() []channeltest.Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.received)
}

func (w *webAPI) Answer(addr string, a channeltest.Answer) { w.answers.Set(addr, a) }

func (w *webAPI) serve(rw http.ResponseWriter, req *http.Request) {
	method := strings.TrimPrefix(req.URL.Path, "/api/")
	_ = req.ParseForm()
	rw.Header().Set("Content-Type", "application/json")
	if method == "auth.test" {
		fmt.Fprint(rw, `{"ok":true,"team":"Acme","user_id":"UBOT"}`)
		return
	}
	channel := req.PostForm.Get("channel")
	switch w.answers.Await(req.Context(), channel) {
	case channeltest.Fail:
		fmt.Fprint(rw, `{"ok":false,"error":"internal_error"}`)
		return
	case channeltest.Refuse:
		fmt.Fprint(rw, `{"ok":false,"error":"channel_not_found"}`)
		return
	case channeltest.Throttle:
		rw.Header().Set("Retry-After", fmt.Sprint(int(channeltest.ThrottleFor.Seconds())))
		rw.WriteHeader(http.StatusTooManyRequests)
		return
	case channeltest.Hang:
		return
	}
	r := channeltest.Received{Address: channel, Text: words(req.PostForm)}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch method {
	case "chat.postMessage":
		w.ts++
		ts := fmt.Sprintf("1700000000.%06d", w.ts)
		if thread := req.PostForm.Get("thread_ts"); thread != "" {
			r.Run = w.runs[thread]
		} else {
			r.Run = runOf(req.PostForm)
			w.runs[ts] = r.Run
		}
		w.received = append(w.received, r)
		fmt.Fprintf(rw, `{"ok":true,"channel":%q,"ts":%q}`, channel, ts)
	case "chat.update":
		ts := req.PostForm.Get("ts")
		r.Run = w.runs[ts]
		r.Settle = strings.Contains(req.PostForm.Get("blocks"), "interlock_outcome")
		w.received = append(w.received, r)
		fmt.Fprintf(rw, `{"ok":true,"channel":%q,"ts":%q,"text":""}`, channel, ts)
	default:
		fmt.Fprint(rw, `{"ok":false,"error":"unknown_method"}`)
	}
}

// words is what a message says: its text and its blocks' texts, without
// mrkdwn's asterisks.
func words(f url.Values) string {
	s := f.Get("text") + "\n" + f.Get("blocks")
	return strings.ReplaceAll(s, "*", "")
}

// runOf is the flow/run a message's buttons name.
func runOf(f url.Values) string {
	var blocks []struct {
		Elements []struct {
			Value string `json:"value"`
		} `json:"elements"`
	}
	_ = json.Unmarshal([]byte(f.Get("blocks")), &blocks)
	for _, b := range blocks {
		for _, e := range b.Elements {
			var r struct {
				Flow string `json:"f"`
				Run  string `json:"r"`
			}
			if json.Unmarshal([]byte(e.Value), &r) == nil && r.Run != "" {
				return r.Flow + "/" + r.Run
			}
		}
	}
	return ""
}
