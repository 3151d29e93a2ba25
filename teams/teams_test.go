package teams_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/teams"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// sig is the signature in the fake Workflows URLs: a credential that
// must never show.
const sig = "S3cr3tSigN0tForLogs"

// workflowPath is the path of a fake Workflows URL, as Power Automate
// makes them.
const workflowPath = "/workflows/0f1e2d3c4b5a/triggers/manual/paths/invoke"

const publicURL = "https://interlock.example.com"

// schema is the Adaptive Card 1.5 schema, compiled once.
var schema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	f, err := os.Open("testdata/adaptive-card-1.5.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const id = "http://adaptivecards.io/schemas/adaptive-card.json"
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return c.Compile(id)
})

// post is a card the fake receiver accepted, decoded.
type post struct {
	Card struct {
		Body []struct {
			Type  string `json:"type"`
			Text  string `json:"text"`
			Facts []struct {
				Title string `json:"title"`
				Value string `json:"value"`
			} `json:"facts"`
		} `json:"body"`
		Actions []struct {
			Type  string `json:"type"`
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"actions"`
		MSTeams struct {
			Entities []struct {
				Type      string `json:"type"`
				Text      string `json:"text"`
				Mentioned struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"mentioned"`
			} `json:"entities"`
		} `json:"msteams"`
	}
	Raw []byte
}

// text is every text of the card's body, one per line.
func (p post) text() string {
	var b strings.Builder
	for _, e := range p.Card.Body {
		b.WriteString(e.Text + "\n")
		for _, f := range e.Facts {
			b.WriteString(f.Title + ": " + f.Value + "\n")
		}
	}
	return b.String()
}

// fact is the value of the card's fact titled title.
func (p post) fact(title string) string {
	for _, e := range p.Card.Body {
		for _, f := range e.Facts {
			if f.Title == title {
				return f.Value
			}
		}
	}
	return ""
}

// receiver is a fake Teams Workflows webhook: it checks that each post is
// a message with one Adaptive Card that fits the 1.5 schema, then answers
// as fail says (202 when fail is nil or returns 0).
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	fail func(n int) (int, http.Header, string)

	mu       sync.Mutex
	attempts int
	times    []time.Time
	posts    []post
}

func newReceiver(t *testing.T, fail func(n int) (int, http.Header, string)) *receiver {
	r := &receiver{t: t, fail: fail}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// transport reaches the receiver, a TLS server on 127.0.0.1, through the
// outbound policy, with 127.0.0.1 allowed by name as for local
// development.
func (r *receiver) transport() http.RoundTripper {
	tr := egress.Policy{Allow: []string{"127.0.0.1"}}.Transport()
	tr.TLSClientConfig = r.srv.Client().Transport.(*http.Transport).TLSClientConfig
	return tr
}

// url is the receiver's Workflows URL, with its signature.
func (r *receiver) url() string {
	return r.srv.URL + workflowPath + "?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + sig
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != workflowPath || req.URL.Query().Get("sig") != sig {
		http.Error(w, "unknown workflow", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.attempts++
	n := r.attempts
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	if r.fail != nil {
		if code, h, text := r.fail(n); code != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
			_, _ = io.WriteString(w, text)
			return
		}
	}
	p, err := checkMessage(req.Header.Get("Content-Type"), body)
	if err != nil {
		r.t.Errorf("the receiver got a post Teams would refuse: %v\n%s", err, body)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.posts = append(r.posts, p)
	r.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// checkMessage checks a post as a Workflows webhook takes it: a message
// with one attachment, an Adaptive Card that fits the schema once Teams'
// msteams extension is taken out, whose mentions each stand in its text.
func checkMessage(contentType string, body []byte) (post, error) {
	var p post
	if contentType != "application/json" {
		return p, fmt.Errorf("Content-Type %q", contentType)
	}
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string          `json:"contentType"`
			ContentURL  json.RawMessage `json:"contentUrl"`
			Content     json.RawMessage `json:"content"`
		} `json:"attachments"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return p, err
	}
	if m.Type != "message" || len(m.Attachments) != 1 || m.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" ||
		string(m.Attachments[0].ContentURL) != "null" {
		return p, fmt.Errorf("not a message with one Adaptive Card attachment and a null contentUrl")
	}
	if err := checkCard(m.Attachments[0].Content); err != nil {
		return p, err
	}
	if err := json.Unmarshal(m.Attachments[0].Content, &p.Card); err != nil {
		return p, err
	}
	p.Raw = m.Attachments[0].Content
	for _, e := range p.Card.MSTeams.Entities {
		if e.Type != "mention" || !strings.Contains(p.text(), e.Text) || e.Mentioned.ID == "" {
			return p, fmt.Errorf("mention %+v does not stand in the card's text", e)
		}
	}
	return p, nil
}

// checkCard validates an Adaptive Card against the 1.5 schema, without
// Teams' msteams extension, which the schema does not declare.
func checkCard(raw []byte) error {
	sch, err := schema()
	if err != nil {
		return fmt.Errorf("compiling the Adaptive Card schema: %w", err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c["version"] != "1.5" || c["type"] != "AdaptiveCard" {
		return fmt.Errorf("card type %v version %v, want AdaptiveCard 1.5", c["type"], c["version"])
	}
	delete(c, "msteams")
	return sch.Validate(c)
}

func (r *receiver) accepted() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.posts)
}

func (r *receiver) waitPosts(t *testing.T, n int) []post {
	t.Helper()
	natstest.Eventually(t, fmt.Sprintf("%d card(s) accepted", n), func() bool { return len(r.accepted()) >= n })
	return r.accepted()
}

// rig is a service, the Teams channel on it and what it logged.
type rig struct {
	svc *interlock.Service
	tm  *teams.Teams
	log *natstest.Buffer

	mu       sync.Mutex
	observed []string
	dead     int
}

func directoryYAML(roles map[string]string) string {
	y := `people:
  - name: ann@example.com
    roles: [supervisor]
    teams: ann@contoso.com
  - name: bob
    roles: [supervisor, finance]
roles:
`
	for _, r := range slices.Sorted(func(yield func(string) bool) {
		for k := range roles {
			if !yield(k) {
				return
			}
		}
	}) {
		y += fmt.Sprintf("  - name: %s\n    teams: %q\n", r, roles[r])
	}
	return y
}

func start(t *testing.T, roles map[string]string, cfg teams.Config) *rig {
	t.Helper()
	dir, err := people.Parse([]byte(directoryYAML(roles)), "test")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartServer(t, "")
	rg := &rig{svc: natstest.Start(t, srv, payFlow()), log: &natstest.Buffer{}}
	logger := zerolog.New(rg.log)
	cfg.Directory = func() *people.Directory { return dir }
	cfg.PublicURL = publicURL
	cfg.Logger = &logger
	cfg.FirstRetry = 20 * time.Millisecond
	cfg.MaxRetry = cmpOr(cfg.MaxRetry, 100*time.Millisecond)
	cfg.Observe = func(d notify.Delivery, err error, dead bool) {
		rg.mu.Lock()
		defer rg.mu.Unlock()
		if err != nil {
			rg.observed = append(rg.observed, err.Error())
		}
		if dead {
			rg.dead++
		}
	}
	if cfg.Transport == nil {
		t.Fatal("the test needs the receiver's transport")
	}
	rg.tm, err = teams.New(rg.svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rg.svc.Attach(t.Context(), rg.tm); err != nil {
		t.Fatal(err)
	}
	return rg
}

func cmpOr(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

// publish publishes an event of kind for run r-1 of flow refund.
func (rg *rig) publish(t *testing.T, kind string, data any) {
	t.Helper()
	typ, ok := protocol.OutboundType(kind)
	if !ok {
		t.Fatalf("no type for %s", kind)
	}
	natstest.Publish(t, rg.svc.JetStream(), rg.svc.Names().Event("refund", "r-1", kind), typ, "r-1", data)
}

func approval() protocol.Interrupted {
	at := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	return protocol.Interrupted{
		Flow: "refund", Run: "r-1", Node: "approve", RequestID: "rq_1", ResumeToken: "tok-must-not-show", Checkpoint: 3,
		Kind: protocol.KindApproval, Action: "issue_refund", ApproverRole: "supervisor",
		Title:       "Refund order 4821",
		Description: "The customer was **charged twice**.",
		Args:        json.RawMessage(`{"amount": 4800, "currency": "USD", "order": "4821"}`),
		ArgsSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","title":"Amount","x-interlock-display":"currency"},` +
			`"currency":{"type":"string"},"order":{"type":"string","title":"Order"}}}`),
		Requester: "support-bot", ExpiresAt: &at,
		OnTimeout: &protocol.Policy{Action: protocol.TimeoutEscalate, ApproverRole: "finance_lead"},
		Assignees: []string{"ann@example.com", "bob"},
	}
}

func TestApprovalIsPostedWithItsFactsAndButton(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	in := approval()
	in.Quorum = &protocol.Quorum{Required: 2}
	in.Votes = []protocol.Vote{{Approver: "carol", Verdict: protocol.VerdictApprove, Digest: "d"}}
	rg.publish(t, protocol.EventInterrupted, in)

	p := rc.waitPosts(t, 1)[0]
	text := p.text()
	for _, want := range []string{"Refund order 4821", "charged twice", "refund · r-1 · for supervisor"} {
		if !strings.Contains(text, want) {
			t.Errorf("the card does not say %q:\n%s", want, text)
		}
	}
	for title, want := range map[string]string{
		"Amount": "$4,800.00", "Order": "4821", "Action": "issue_refund", "Requested by": "support-bot",
		"Decide by": "Sat 21 Nov 2026 10:30 UTC, then it goes to finance_lead", "Votes": "1 of 2: carol (approve)",
	} {
		if got := p.fact(title); got != want {
			t.Errorf("fact %s = %q, want %q", title, got, want)
		}
	}
	if !strings.Contains(text, "Assigned to <at>ann@example.com</at>, bob") {
		t.Errorf("the card does not mention the assignees:\n%s", text)
	}
	ents := p.Card.MSTeams.Entities
	if len(ents) != 1 || ents[0].Mentioned.ID != "ann@contoso.com" || ents[0].Mentioned.Name != "ann@example.com" {
		t.Errorf("mentions = %+v, want ann@example.com by her Teams account ann@contoso.com", ents)
	}
	if len(p.Card.Actions) != 1 || p.Card.Actions[0].Type != "Action.OpenUrl" || p.Card.Actions[0].URL != publicURL+"/runs/refund/r-1" {
		t.Errorf("actions = %+v, want one Action.OpenUrl to the run's page", p.Card.Actions)
	}
	if bytes.Contains(p.Raw, []byte("tok-must-not-show")) {
		t.Error("the card holds the resume token")
	}
}

func TestQuorumRolesEachGetTheCardOnce(t *testing.T) {
	t.Parallel()
	sup, fin := newReceiver(t, nil), newReceiver(t, nil)
	// Both receivers share the test certificate's transport.
	rg := start(t, map[string]string{"supervisor": sup.url(), "finance": fin.url()}, teams.Config{Transport: sup.transport()})
	in := approval()
	in.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{{Role: "supervisor", Count: 1}, {Role: "finance", Count: 1}}}
	rg.publish(t, protocol.EventInterrupted, in)
	sup.waitPosts(t, 1)
	fin.waitPosts(t, 1)
}

func TestReminderPostsAFollowUpMentioningWhoItWaitsOn(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	in := approval()
	in.Assignees = nil
	rg.publish(t, protocol.EventInterrupted, in)
	rc.waitPosts(t, 1)
	rg.publish(t, protocol.EventReminded, protocol.Reminded{Flow: "refund", Run: "r-1", RequestID: "rq_1", Kind: protocol.KindApproval,
		ExpiresAt: in.ExpiresAt, ApproverRole: "supervisor", Checkpoint: 3})
	p := rc.waitPosts(t, 2)[1]
	text := p.text()
	for _, want := range []string{"Reminder: Refund order 4821 still waits for a decision", "Waiting on <at>ann@example.com</at>, bob",
		"Decide by Sat 21 Nov 2026 10:30 UTC, then it goes to finance_lead"} {
		if !strings.Contains(text, want) {
			t.Errorf("the reminder does not say %q:\n%s", want, text)
		}
	}
	if len(p.Card.MSTeams.Entities) != 1 || len(p.Card.Actions) != 1 {
		t.Errorf("the reminder has mentions %+v and actions %+v, want ann's mention and the button", p.Card.MSTeams.Entities, p.Card.Actions)
	}
}

func TestSettledElsewhereIsFollowedUpWithWhoAndHow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		kind string
		data any
		want string
	}{
		{"approved", protocol.EventResumed, protocol.Resumed{Flow: "refund", Run: "r-1", RequestID: "rq_1", Kind: protocol.KindApproval,
			Decision: "approve", Approver: "ann@example.com"}, "Approved by ann@example.com"},
		{"rejected", protocol.EventResumed, protocol.Resumed{Flow: "refund", Run: "r-1", RequestID: "rq_1", Kind: protocol.KindApproval,
			Decision: "reject", Approver: "bob", Reason: "duplicate of 4820"}, "Rejected by bob\n"},
		{"expired", protocol.EventExpired, protocol.Expired{Flow: "refund", Run: "r-1", RequestID: "rq_1", Kind: protocol.KindApproval,
			ExpiresAt: time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)}, "Expired: nobody decided by Sat 21 Nov 2026 10:30 UTC"},
		{"cancelled", protocol.EventCancelled, protocol.Cancelled{Flow: "refund", Run: "r-1", By: "ops", Reason: "customer withdrew"}, "Cancelled by ops"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
			rg.publish(t, protocol.EventInterrupted, approval())
			rc.waitPosts(t, 1)
			rg.publish(t, c.kind, c.data)
			// A second outcome of a settled request adds nothing.
			rg.publish(t, protocol.EventCancelled, protocol.Cancelled{Flow: "refund", Run: "r-1", By: "late"})
			rg.publish(t, protocol.EventInterrupted, func() protocol.Interrupted {
				in := approval()
				in.Run, in.RequestID, in.Title = "r-1", "rq_2", "Next request"
				return in
			}())
			ps := rc.waitPosts(t, 3)
			if !strings.Contains(ps[1].text(), c.want) || !strings.Contains(ps[1].text(), "Refund order 4821") {
				t.Errorf("the follow-up says:\n%s\nwant %q about Refund order 4821", ps[1].text(), c.want)
			}
			if !strings.Contains(ps[2].text(), "Next request") {
				t.Errorf("third post is not the next request's card but:\n%s", ps[2].text())
			}
			if len(ps) != 3 {
				t.Errorf("%d posts, want the card, one follow-up and the next card", len(ps))
			}
		})
	}
}

// A channel that is down gets each post once when it is back, and never
// a request's card after its outcome: its card waits for another attempt
// without holding back the other channel or the request's outcome, and a
// card whose request was settled meanwhile is not posted.
func TestReceiverDownThenBackGetsEachCardOnce(t *testing.T) {
	t.Parallel()
	// finance fails its first three posts; supervisor takes every post,
	// so that the events delivered again must not reach it twice.
	fin := newReceiver(t, func(n int) (int, http.Header, string) {
		if n <= 3 {
			return http.StatusServiceUnavailable, nil, "try later"
		}
		return 0, nil, ""
	})
	sup := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": sup.url(), "finance": fin.url()}, teams.Config{Transport: sup.transport()})
	in := approval()
	in.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{{Role: "supervisor", Count: 1}, {Role: "finance", Count: 1}}}
	rg.publish(t, protocol.EventInterrupted, in)
	rg.publish(t, protocol.EventResumed, protocol.Resumed{Flow: "refund", Run: "r-1", RequestID: "rq_1", Kind: protocol.KindApproval,
		Decision: "approve", Approver: "ann@example.com"})
	sup.waitPosts(t, 2)
	natstest.Eventually(t, "finance's outcome posted", func() bool {
		ps := fin.accepted()
		return len(ps) > 0 && strings.Contains(ps[len(ps)-1].text(), "Approved by ann@example.com")
	})
	waitIdle(t, rg)
	if n := len(sup.accepted()); n != 2 {
		t.Errorf("supervisor got %d posts, want the card and the outcome once", n)
	}
	ps := fin.accepted()
	if fin.attempts < 4 || len(ps) > 2 || !strings.Contains(ps[len(ps)-1].text(), "Approved by ann@example.com") {
		t.Errorf("finance had %d attempts and %d posts; want the 3 refused, then at most the card and the outcome, the outcome last", fin.attempts, len(ps))
	}
	if len(ps) == 2 && !strings.Contains(ps[0].text(), "Decide by") {
		t.Errorf("finance's first post is not the card:\n%s", ps[0].text())
	}
}

// waitIdle waits until the channel's consumer has nothing pending nor in
// hand, and no attempt waits in the retry stream.
func waitIdle(t *testing.T, rg *rig) {
	t.Helper()
	js, names := rg.svc.JetStream(), rg.svc.Names()
	natstest.Eventually(t, "the Teams consumer idle", func() bool {
		c, err := js.Consumer(t.Context(), names.EventStream(), teams.ConsumerName(names))
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		waiting, werr := notify.Waiting(t.Context(), js, names, teams.ConsumerName(names))
		return err == nil && werr == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 && waiting == 0
	})
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(n int) (int, http.Header, string) {
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, "slow down"
		}
		return 0, nil, ""
	})
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	rg.publish(t, protocol.EventInterrupted, approval())
	rc.waitPosts(t, 1)
	rc.mu.Lock()
	gap := rc.times[1].Sub(rc.times[0])
	rc.mu.Unlock()
	if gap < 900*time.Millisecond {
		t.Errorf("the card came back %s after a 429 with Retry-After: 1, want at least a second (the back-off alone is 20ms)", gap)
	}
}

func TestRefusedCardIsDeadLetteredWithStatusAndNoURL(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(int) (int, http.Header, string) {
		return http.StatusBadRequest, nil, `{"error":{"code":"InvalidRequestContent","message":"bad card for ` + workflowPath + `?sig=` + sig + `"}}`
	})
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	rg.publish(t, protocol.EventInterrupted, approval())
	names := rg.svc.Names()
	dl := natstest.WaitFor(t, rg.svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable),
		func(rs []natstest.Received) bool { return len(rs) > 0 })
	msg := dl[0].Header.Get(bus.HeaderError)
	if dl[0].Header.Get(bus.HeaderConsumer) != teams.ConsumerName(names) {
		t.Errorf("dead letter's consumer %q", dl[0].Header.Get(bus.HeaderConsumer))
	}
	for _, want := range []string{"400 Bad Request", "InvalidRequestContent", "role supervisor", "after 1 attempt"} {
		if !strings.Contains(msg, want) {
			t.Errorf("dead letter error %q does not say %q", msg, want)
		}
	}
	if rc.attempts != 1 {
		t.Errorf("%d attempts, want a 400 dead-lettered at once", rc.attempts)
	}
	rg.assertNoURL(t, msg)
}

// A Workflows URL on a private address (a directory entry pointing at
// the internal network) is refused by the default outbound policy before
// any connection, and dead-lettered at once, not retried for a day.
func TestAWorkflowsURLOnAPrivateAddressIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	internal := "https://10.20.30.40" + workflowPath + "?sig=" + sig
	rg := start(t, map[string]string{"supervisor": internal}, teams.Config{Transport: egress.Policy{}.Transport()})
	rg.publish(t, protocol.EventInterrupted, approval())
	names := rg.svc.Names()
	dls := natstest.WaitFor(t, rg.svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	e := dls[0].Header.Get(bus.HeaderError)
	if !strings.Contains(e, "after 1 attempt") || !strings.Contains(e, "egress: refused to connect to 10.20.30.40:443: a private address") || !strings.Contains(e, "--egress-allow") {
		t.Fatalf("dead letter's error %q; want the private address refused at once, saying how to allow it", e)
	}
	rg.assertNoURL(t, e)
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if len(rg.observed) != 1 || rg.dead != 1 {
		t.Fatalf("%d attempts observed, %d dead-lettered; want one attempt, dead-lettered", len(rg.observed), rg.dead)
	}
}

func TestWorkflowsURLIsNeverLogged(t *testing.T) {
	t.Parallel()
	// A receiver that answers 500 quoting the URL, then one that is gone.
	rc := newReceiver(t, func(n int) (int, http.Header, string) {
		if n == 1 {
			return http.StatusInternalServerError, nil, "failed for " + workflowPath + "?sig=" + sig
		}
		return 0, nil, ""
	})
	gone := newReceiver(t, nil)
	goneURL := gone.url()
	gone.srv.Close()
	rg := start(t, map[string]string{"supervisor": rc.url(), "finance": goneURL},
		teams.Config{Transport: rc.transport(), RetryFor: 300 * time.Millisecond})
	in := approval()
	in.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{{Role: "supervisor", Count: 1}, {Role: "finance", Count: 1}}}
	rg.publish(t, protocol.EventInterrupted, in)
	rc.waitPosts(t, 1)
	natstest.Eventually(t, "the unreachable channel's card dead-lettered", func() bool {
		rg.mu.Lock()
		defer rg.mu.Unlock()
		return rg.dead > 0
	})
	rg.mu.Lock()
	observed := strings.Join(rg.observed, "\n")
	rg.mu.Unlock()
	if !strings.Contains(observed, "500 Internal Server Error") || !strings.Contains(observed, "role finance") {
		t.Errorf("the errors do not say what failed:\n%s", observed)
	}
	rg.assertNoURL(t, observed)
	names := rg.svc.Names()
	for _, d := range natstest.Read(t, rg.svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable)) {
		rg.assertNoURL(t, d.Header.Get(bus.HeaderError))
	}
	if !strings.Contains(rg.log.String(), "event not delivered") {
		t.Errorf("the log does not show the failed attempts:\n%s", rg.log.String())
	}
}

// assertNoURL fails the test if s, or the channel's log, holds a
// Workflows URL's signature or path.
func (rg *rig) assertNoURL(t *testing.T, s string) {
	t.Helper()
	for _, where := range []struct{ name, text string }{{"the error", s}, {"the log", rg.log.String()}} {
		for _, secret := range []string{sig, workflowPath} {
			if strings.Contains(where.text, secret) {
				t.Errorf("%s holds %q:\n%s", where.name, secret, where.text)
			}
		}
	}
}

func TestHostileDescriptionAddsNoLinkNorMention(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	in := approval()
	in.Title = "[Approve now](https://evil.example/a) <at>ann@example.com</at>"
	in.Description = "Please [click here](https://evil.example/approve \"t\") or ![x](https://evil.example/p.png)\n" +
		"[Approve][1]\n\n[1]: https://evil.example/ref\n" +
		"<a href=\"https://evil.example\">link</a> <https://evil.example/auto> https://evil.example/bare www.evil.example\n" +
		"<at>ann@example.com</at> <script>alert(1)</script> please [[nested](https://evil.example/n)](https://evil.example/m) javascript://x"
	in.Args = json.RawMessage(`{"note": "[pay](https://evil.example/pay)", "site": "https://evil.example/site"}`)
	in.ArgsSchema = nil
	rg.publish(t, protocol.EventInterrupted, in)
	p := rc.waitPosts(t, 1)[0]
	text := p.text()
	mentions := strings.Count(text, "<at>")
	if mentions != 1 || len(p.Card.MSTeams.Entities) != 1 {
		t.Errorf("the card has %d <at> and mentions %+v, want only the one of the assignee:\n%s", mentions, p.Card.MSTeams.Entities, text)
	}
	for _, bad := range []string{"://", "](", "]:", "<a ", "<script", "www.evil", "evil.example/ref"} {
		if strings.Contains(text, bad) {
			t.Errorf("the card's text holds %q:\n%s", bad, text)
		}
	}
	for _, kept := range []string{"click here", "Approve now", "Please", "link"} {
		if !strings.Contains(text, kept) {
			t.Errorf("the card lost the text %q:\n%s", kept, text)
		}
	}
	if len(p.Card.Actions) != 1 || p.Card.Actions[0].URL != publicURL+"/runs/refund/r-1" {
		t.Errorf("actions = %+v, want only the button to the run's page", p.Card.Actions)
	}
	if bytes.Count(p.Raw, []byte("://")) != 2 { // the $schema and the button
		t.Errorf("the card holds a web address besides its schema and its button:\n%s", p.Raw)
	}
}

func TestCardCheckRefusesWhatTeamsWouldNot(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]string{
		"fact without value": `{"type":"AdaptiveCard","version":"1.5","body":[{"type":"FactSet","facts":[{"title":"a"}]}]}`,
		"unknown element":    `{"type":"AdaptiveCard","version":"1.5","body":[{"type":"Script","text":"x"}]}`,
		"unknown action":     `{"type":"AdaptiveCard","version":"1.5","body":[],"actions":[{"type":"Action.Run","url":"x"}]}`,
		"open url sans url":  `{"type":"AdaptiveCard","version":"1.5","body":[],"actions":[{"type":"Action.OpenUrl","title":"x"}]}`,
		"old version":        `{"type":"AdaptiveCard","version":"1.0","body":[]}`,
	} {
		if err := checkCard([]byte(c)); err == nil {
			t.Errorf("%s: the schema check took %s", name, c)
		}
	}
	if err := checkCard([]byte(`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"TextBlock","text":"hi","wrap":true}]}`)); err != nil {
		t.Errorf("the schema check refused a plain card: %v", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, payFlow())
	dir := func() *people.Directory { return people.Empty() }
	for _, c := range []struct {
		name    string
		cfg     teams.Config
		wantErr string
	}{
		{"no directory", teams.Config{PublicURL: publicURL}, "Config.Directory is nil"},
		{"no public URL", teams.Config{Directory: dir}, "Config.PublicURL is empty"},
		{"http beyond loopback", teams.Config{Directory: dir, PublicURL: "http://interlock.example.com"}, "use https://"},
		{"query", teams.Config{Directory: dir, PublicURL: "https://interlock.example.com/?a=b"}, "not a base address"},
		{"negative timeout", teams.Config{Directory: dir, PublicURL: publicURL, Timeout: -1}, "Config.Timeout is negative"},
		{"https", teams.Config{Directory: dir, PublicURL: publicURL}, ""},
		{"http to loopback", teams.Config{Directory: dir, PublicURL: "http://127.0.0.1:8080/"}, ""},
		{"bad egress entry", teams.Config{Directory: dir, PublicURL: publicURL, Egress: egress.Policy{Allow: []string{"https://hooks.internal/"}}}, "Config.Egress: egress: Allow[0]"},
	} {
		_, err := teams.New(svc, c.cfg)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: New = %v, want an error saying %q", c.name, err, c.wantErr)
		}
	}
}

type payState struct {
	Verdict string `json:"verdict,omitempty"`
}

// payFlow asks a supervisor's approval of a payment.
func payFlow() *engine.Flow {
	return engine.NewFlow[payState]("pay").
		Node("review", func(ctx context.Context, n *engine.Node[payState]) error {
			d, err := n.Approve(ctx, engine.Approval{
				Action: "pay_invoice", Args: map[string]any{"amount": 1250, "currency": "EUR"},
				ArgsSchema:   json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","title":"Amount","x-interlock-display":"currency"}}}`),
				Title:        "Pay invoice 7",
				Description:  "Acme's invoice for *March*.",
				ApproverRole: "supervisor", Requester: "billing-bot", Timeout: time.Hour,
			})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).
		Start("review").MustBuild()
}

func TestRunsApprovalIsPostedAndItsDecisionFollowedUp(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	c := rg.svc.Client("/test")
	ev, err := c.Start(t.Context(), "pay", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil {
		t.Fatal(err)
	}
	p := rc.waitPosts(t, 1)[0]
	if p.fact("Amount") != "€1,250.00" || !strings.Contains(p.text(), "Pay invoice 7") ||
		p.Card.Actions[0].URL != publicURL+"/runs/pay/"+in.Run {
		t.Errorf("the run's card:\n%s\nactions %+v", p.text(), p.Card.Actions)
	}
	if _, err := rg.svc.ResumeAs(t.Context(), c, "pay", in.Run, protocol.Resume{RequestID: in.RequestID, Decision: "approve"},
		"ann@example.com", []string{"supervisor"}); err != nil {
		t.Fatal(err)
	}
	if got := rc.waitPosts(t, 2)[1].text(); !strings.Contains(got, "Approved by ann@example.com") || !strings.Contains(got, "Pay invoice 7") {
		t.Errorf("the follow-up says:\n%s\nwant Approved by ann@example.com about Pay invoice 7", got)
	}
}
