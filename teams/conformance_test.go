package teams_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/teams"
)

// TestTeamsPassesTheChannelSuite: Teams is a channel of the seam that
// reaches roles' channels only, against fake Workflows webhooks that
// check each card as Teams would.
func TestTeamsPassesTheChannelSuite(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{
		Name:     teams.Name,
		Features: channeltest.Features{RolesOnly: true, RetryAfter: true, SecretAddresses: true, Settle: true},
		New: func(t *testing.T) channeltest.Remote {
			r := &workflows{t: t}
			r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
			t.Cleanup(r.srv.Close)
			t.Cleanup(r.answers.Release)
			return r
		},
	})
}

// workflows is the suite's Teams: one Workflows webhook per role, on a
// TLS server on loopback.
type workflows struct {
	t   *testing.T
	srv *httptest.Server

	answers  channeltest.Answers
	mu       sync.Mutex
	received []channeltest.Received
}

func (w *workflows) Reach(_ *testing.T, _ *interlock.Service, person string) (string, string) {
	// A person's Teams account, mentioned on cards; Teams posts to roles.
	return person + "@contoso.com", ""
}

func (w *workflows) RoleAddress(role string) string {
	return w.srv.URL + "/workflows/" + role + "/triggers/manual/paths/invoke?api-version=1&sig=" + sig + role
}

func (w *workflows) Start(t *testing.T, svc *interlock.Service, d notify.Dispatch) func() {
	t.Helper()
	tr := egress.Policy{Allow: []string{"127.0.0.1"}}.Transport()
	tr.TLSClientConfig = w.srv.Client().Transport.(*http.Transport).TLSClientConfig
	tm, err := teams.New(svc, teams.Config{Directory: d.Directory, PublicURL: d.PublicURL, Transport: tr,
		FirstRetry: d.FirstRetry, MaxRetry: d.MaxRetry, Logger: d.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tm.Stop(context.WithoutCancel(t.Context())) }
}

func (w *workflows) Received() []channeltest.Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.received)
}

func (w *workflows) Answer(addr string, a channeltest.Answer) { w.answers.Set(addr, a) }

func (w *workflows) serve(rw http.ResponseWriter, req *http.Request) {
	addr := w.srv.URL + req.URL.RequestURI()
	role := strings.Split(strings.TrimPrefix(req.URL.Path, "/workflows/"), "/")[0]
	if req.URL.Query().Get("sig") != sig+role {
		http.Error(rw, "unknown workflow", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(req.Body)
	switch w.answers.Await(req.Context(), addr) {
	case channeltest.Fail:
		http.Error(rw, "try later", http.StatusServiceUnavailable)
		return
	case channeltest.Refuse:
		http.Error(rw, "the workflow is turned off", http.StatusNotFound)
		return
	case channeltest.Throttle:
		rw.Header().Set("Retry-After", strconv.Itoa(int(channeltest.ThrottleFor.Seconds())))
		http.Error(rw, "slow down", http.StatusTooManyRequests)
		return
	case channeltest.Hang:
		return
	}
	p, err := checkMessage(req.Header.Get("Content-Type"), body)
	if err != nil {
		w.t.Errorf("the workflow got a post Teams would refuse: %v\n%s", err, body)
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	r := channeltest.Received{Address: addr, Text: p.text()}
	if len(p.Card.Actions) > 0 {
		r.Link = p.Card.Actions[0].URL
		r.Settle = p.Card.Actions[0].Title == "Open in Interlock"
	}
	w.mu.Lock()
	w.received = append(w.received, r)
	w.mu.Unlock()
	rw.WriteHeader(http.StatusAccepted)
}
