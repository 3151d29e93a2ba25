package teams_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	for _, r := range slices.Sorted(maps.Keys(roles)) {
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
	rg := &rig{svc: natstest.Start(t, srv, payFlow(), refundFlow()), log: &natstest.Buffer{}}
	logger := zerolog.New(rg.log)
	cfg.Directory = func() *people.Directory { return dir }
	cfg.PublicURL = publicURL
	cfg.Logger = &logger
	cfg.FirstRetry = 20 * time.Millisecond
	cfg.MaxRetry = cmp.Or(cfg.MaxRetry, 100*time.Millisecond)
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

// refund is the state of the tests' refund flow: what its approval asks.
type refund struct {
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	Args        map[string]any `json:"args,omitempty"`
	Role        string         `json:"role,omitempty"`
	QuorumRoles []string       `json:"quorumRoles,omitempty"`
	Quorum      int            `json:"quorum,omitempty"`
	Assignees   []string       `json:"assignees,omitempty"`
	TimeoutMS   int            `json:"timeoutMs,omitempty"`
	Escalate    string         `json:"escalate,omitempty"`
	Remind      bool           `json:"remind,omitempty"`
	Verdict     string         `json:"verdict,omitempty"`
}

// refundFlow asks, at node approve, the approval its state describes: by
// default the supervisor's approval of a $4,800 refund of order 4821,
// requested by support-bot, due in an hour, then escalated to
// finance_lead.
func refundFlow() *engine.Flow {
	return engine.NewFlow[refund]("refund").
		Node("approve", func(ctx context.Context, n *engine.Node[refund]) error {
			s := n.State()
			a := engine.Approval{
				Action:       "issue_refund",
				Title:        cmp.Or(s.Title, "Refund order 4821"),
				Description:  cmp.Or(s.Description, "The customer was **charged twice**."),
				ApproverRole: cmp.Or(s.Role, "supervisor"),
				Requester:    "support-bot",
				Assignees:    s.Assignees,
				Timeout:      time.Hour,
				OnTimeout:    engine.Escalate(cmp.Or(s.Escalate, "finance_lead"), time.Hour, engine.Policy{}),
			}
			a.Args = map[string]any{"amount": 4800, "currency": "USD", "order": "4821"}
			a.ArgsSchema = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","title":"Amount","x-interlock-display":"currency"},` +
				`"currency":{"type":"string"},"order":{"type":"string","title":"Order"}}}`)
			if s.Args != nil {
				a.Args, a.ArgsSchema = s.Args, nil
			}
			if s.TimeoutMS > 0 {
				a.Timeout = time.Duration(s.TimeoutMS) * time.Millisecond
				a.OnTimeout = engine.Policy{}
				if s.Escalate != "" {
					a.OnTimeout = engine.Escalate(s.Escalate, time.Hour, engine.Policy{})
				}
			}
			if s.Quorum > 1 {
				a.Quorum = &protocol.Quorum{Required: s.Quorum}
			}
			for _, r := range s.QuorumRoles {
				if a.Quorum == nil {
					a.Quorum = &protocol.Quorum{}
				}
				a.Quorum.Roles = append(a.Quorum.Roles, protocol.RoleCount{Role: r, Count: 1})
			}
			if s.Remind {
				a.Reminders = []time.Duration{time.Hour - 2*time.Second}
			}
			d, err := n.Approve(ctx, a)
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).
		Start("approve").MustBuild()
}

// startRefund starts a refund run of s as run, and returns its approval.
func (rg *rig) startRefund(t *testing.T, run string, s refund) protocol.Interrupted {
	t.Helper()
	b, _ := json.Marshal(s)
	var state map[string]json.RawMessage
	_ = json.Unmarshal(b, &state)
	ev, err := rg.svc.Client("/test").Start(t.Context(), "refund", run, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil || ev.Kind != protocol.EventInterrupted {
		t.Fatalf("starting %s: %s %v", run, ev.Kind, err)
	}
	return in
}

// decide decides run's approval as who.
func (rg *rig) decide(t *testing.T, run string, in protocol.Interrupted, who, decision, reason string) {
	t.Helper()
	ev, err := rg.svc.ResumeAs(t.Context(), rg.svc.Client("/test"), "refund", run,
		protocol.Resume{RequestID: in.RequestID, Decision: decision, Reason: reason}, who, []string{"supervisor", "finance"})
	if err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("%s deciding %s: %s %v", who, run, ev.Kind, err)
	}
}

// assign claims, releases or delegates run's approval as who.
func (rg *rig) assign(t *testing.T, run string, in protocol.Interrupted, who string, a protocol.Assign) {
	t.Helper()
	a.RequestID = in.RequestID
	ev, err := rg.svc.AssignAs(t.Context(), rg.svc.Client("/test"), "refund", run, a, who, []string{"supervisor"})
	if err != nil || ev.Kind == protocol.EventRefused {
		t.Fatalf("%s %s on %s: %s %v", who, a.Op, run, ev.Kind, err)
	}
}

func TestApprovalIsPostedWithItsFactsAndButton(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	in := rg.startRefund(t, "r-1", refund{Quorum: 2, Assignees: []string{"ann@example.com", "bob"}})

	p := rc.waitPosts(t, 1)[0]
	text := p.text()
	for _, want := range []string{"Refund order 4821", "charged twice", "refund · r-1 · for supervisor"} {
		if !strings.Contains(text, want) {
			t.Errorf("the card does not say %q:\n%s", want, text)
		}
	}
	for title, want := range map[string]string{
		"Amount": "$4,800.00", "Order": "4821", "Action": "issue_refund", "Requested by": "support-bot",
		"Decide by": in.ExpiresAt.UTC().Format("Mon 2 Jan 2006 15:04 MST") + ", then it goes to finance_lead", "Votes": "0 of 2",
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
	if in.ResumeToken == "" || bytes.Contains(p.Raw, []byte(in.ResumeToken)) {
		t.Error("the card holds the resume token")
	}
}

func TestQuorumRolesEachGetTheCardOnce(t *testing.T) {
	t.Parallel()
	sup, fin := newReceiver(t, nil), newReceiver(t, nil)
	// Both receivers share the test certificate's transport.
	rg := start(t, map[string]string{"supervisor": sup.url(), "finance": fin.url()}, teams.Config{Transport: sup.transport()})
	rg.startRefund(t, "r-1", refund{QuorumRoles: []string{"supervisor", "finance"}})
	sup.waitPosts(t, 1)
	fin.waitPosts(t, 1)
	waitIdle(t, rg)
	if len(sup.accepted()) != 1 || len(fin.accepted()) != 1 {
		t.Errorf("supervisor got %d cards, finance %d; want one each", len(sup.accepted()), len(fin.accepted()))
	}
}

func TestReminderPostsAFollowUpMentioningWhoItWaitsOn(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	in := rg.startRefund(t, "r-1", refund{Remind: true})
	p := rc.waitPosts(t, 2)[1]
	text := p.text()
	for _, want := range []string{"Reminder: Refund order 4821 still waits for a decision", "Waiting on <at>ann@example.com</at>, bob",
		"Decide by " + in.ExpiresAt.UTC().Format("Mon 2 Jan 2006 15:04 MST") + ", then it goes to finance_lead"} {
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
		name   string
		state  refund
		settle func(t *testing.T, rg *rig, in protocol.Interrupted)
		want   []string
	}{
		{"approved", refund{}, func(t *testing.T, rg *rig, in protocol.Interrupted) {
			rg.decide(t, "r-1", in, "ann@example.com", "approve", "")
		}, []string{"Approved by ann@example.com"}},
		{"rejected", refund{}, func(t *testing.T, rg *rig, in protocol.Interrupted) {
			rg.decide(t, "r-1", in, "bob", "reject", "duplicate of 4820")
		}, []string{"Rejected by bob", "Reason: duplicate of 4820"}},
		{"expired", refund{TimeoutMS: 300}, func(*testing.T, *rig, protocol.Interrupted) {}, []string{"Expired: nobody decided in time"}},
		{"cancelled", refund{}, func(t *testing.T, rg *rig, in protocol.Interrupted) {
			if _, err := rg.svc.Client("/test").Cancel(t.Context(), "refund", "r-1", "customer withdrew"); err != nil {
				t.Fatal(err)
			}
		}, []string{"Cancelled", "Reason: customer withdrew"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, nil)
			rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
			in := rg.startRefund(t, "r-1", c.state)
			rc.waitPosts(t, 1)
			c.settle(t, rg, in)
			ps := rc.waitPosts(t, 2)
			for _, want := range append(c.want, "Refund order 4821 · refund · r-1") {
				if !strings.Contains(ps[1].text(), want) {
					t.Errorf("the follow-up says:\n%s\nwant %q", ps[1].text(), want)
				}
			}
			if a := ps[1].Card.Actions; len(a) != 1 || a[0].URL != publicURL+"/runs/refund/r-1" {
				t.Errorf("the follow-up's actions %+v, want the run's page", a)
			}
			waitIdle(t, rg)
			if n := len(rc.accepted()); n != 2 {
				t.Errorf("%d posts, want the card and one follow-up", n)
			}
		})
	}
}

// A claim, a release and a delegation are told in the channel of the
// role, and a delegation to another role posts there too; the outcome
// reaches both.
func TestClaimsAndDelegationsAreToldInTheRolesChannels(t *testing.T) {
	t.Parallel()
	sup, fin := newReceiver(t, nil), newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": sup.url(), "finance": fin.url()}, teams.Config{Transport: sup.transport()})
	in := rg.startRefund(t, "r-1", refund{})
	sup.waitPosts(t, 1)
	rg.assign(t, "r-1", in, "ann@example.com", protocol.Assign{Op: protocol.AssignClaim})
	if got := sup.waitPosts(t, 2)[1].text(); !strings.Contains(got, "Claimed by ann@example.com") {
		t.Errorf("the claim's note says:\n%s", got)
	}
	rg.assign(t, "r-1", in, "ann@example.com", protocol.Assign{Op: protocol.AssignRelease})
	if got := sup.waitPosts(t, 3)[2].text(); !strings.Contains(got, "Released by ann@example.com") {
		t.Errorf("the release's note says:\n%s", got)
	}
	rg.assign(t, "r-1", in, "ann@example.com", protocol.Assign{Op: protocol.AssignDelegate, To: "role:finance", Reason: "over my limit"})
	p := fin.waitPosts(t, 1)[0]
	if got := p.text(); !strings.Contains(got, "Delegated by ann@example.com to role finance") || !strings.Contains(got, "Reason: over my limit") {
		t.Errorf("the delegation's note in finance says:\n%s", got)
	}
	rg.decide(t, "r-1", in, "bob", "approve", "")
	for name, rc := range map[string]*receiver{"supervisor": sup, "finance": fin} {
		natstest.Eventually(t, name+" told of the outcome", func() bool {
			ps := rc.accepted()
			return strings.Contains(ps[len(ps)-1].text(), "Approved by bob")
		})
	}
}

// An approval escalated to another role is posted there, and followed up
// in the channel it left, which no longer offers to decide it.
func TestEscalationMovesOnFromTheChannelItLeft(t *testing.T) {
	t.Parallel()
	sup, fin := newReceiver(t, nil), newReceiver(t, nil)
	rg := start(t, map[string]string{"supervisor": sup.url(), "finance": fin.url()}, teams.Config{Transport: sup.transport()})
	rg.startRefund(t, "r-1", refund{TimeoutMS: 300, Escalate: "finance"})
	sup.waitPosts(t, 1)
	if got := fin.waitPosts(t, 1)[0].text(); !strings.Contains(got, "Refund order 4821") {
		t.Errorf("finance's card says:\n%s", got)
	}
	if got := sup.waitPosts(t, 2)[1].text(); !strings.Contains(got, "Moved on: now for finance") {
		t.Errorf("supervisor's follow-up says:\n%s", got)
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
		return err == nil && werr == nil && info.NumPending == 0 && info.NumAckPending == 0 && waiting == 0
	})
}

func TestRefusedCardIsDeadLetteredWithStatusAndNoURL(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(int) (int, http.Header, string) {
		return http.StatusBadRequest, nil, `{"error":{"code":"InvalidRequestContent","message":"bad card for ` + workflowPath + `?sig=` + sig + `"}}`
	})
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	rg.startRefund(t, "r-1", refund{})
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
	rc.mu.Lock()
	attempts := rc.attempts
	rc.mu.Unlock()
	if attempts != 1 {
		t.Errorf("%d attempts, want a 400 dead-lettered at once", attempts)
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
	rg.startRefund(t, "r-1", refund{})
	names := rg.svc.Names()
	dls := natstest.WaitFor(t, rg.svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	e := dls[0].Header.Get(bus.HeaderError)
	if !strings.Contains(e, "after 1 attempt") || !strings.Contains(e, "egress: refused to connect to 10.20.30.40:443: a private address") || !strings.Contains(e, "--egress-allow") {
		t.Fatalf("dead letter's error %q; want the private address refused at once, saying how to allow it", e)
	}
	rg.assertNoURL(t, e)
	// The follower observes a dead letter once it is stored.
	natstest.Eventually(t, "the dead letter observed", func() bool {
		rg.mu.Lock()
		defer rg.mu.Unlock()
		return rg.dead > 0
	})
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
	rg.startRefund(t, "r-1", refund{QuorumRoles: []string{"supervisor", "finance"}})
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
	rg.startRefund(t, "r-1", refund{
		Title: "[Approve now](https://evil.example/a) <at>ann@example.com</at>",
		Description: "Please [click here](https://evil.example/approve \"t\") or ![x](https://evil.example/p.png)\n" +
			"[Approve][1]\n\n[1]: https://evil.example/ref\n" +
			"<a href=\"https://evil.example\">link</a> <https://evil.example/auto> https://evil.example/bare www.evil.example\n" +
			"<at>ann@example.com</at> <script>alert(1)</script> please [[nested](https://evil.example/n)](https://evil.example/m) javascript://x",
		Args:      map[string]any{"note": "[pay](https://evil.example/pay)", "site": "https://evil.example/site"},
		Assignees: []string{"ann@example.com", "bob"},
	})
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

// TestARunCancelledWhileItsCardIsPostedIsFollowedUpWithItsReason: the run
// is cancelled while its card is on its way (the receiver holds the
// post), so the dispatcher finds it finished when the post returns; the
// follow-up still says who cancelled and why, read from the cancelled
// event.
func TestARunCancelledWhileItsCardIsPostedIsFollowedUpWithItsReason(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	rc := newReceiver(t, func(n int) (int, http.Header, string) {
		if n == 1 {
			close(held)
			<-release
		}
		return 0, nil, ""
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	rg := start(t, map[string]string{"supervisor": rc.url()}, teams.Config{Transport: rc.transport()})
	rg.startRefund(t, "r-1", refund{})
	select {
	case <-held:
	case <-t.Context().Done():
		t.Fatal("the card was never posted")
	}
	if _, err := rg.svc.Client("/test").Cancel(t.Context(), "refund", "r-1", "customer withdrew"); err != nil {
		t.Fatal(err)
	}
	close(release)
	ps := rc.waitPosts(t, 2)
	for _, want := range []string{"Cancelled", "Reason: customer withdrew"} {
		if !strings.Contains(ps[1].text(), want) {
			t.Errorf("the follow-up says:\n%s\nwant %q", ps[1].text(), want)
		}
	}
}
