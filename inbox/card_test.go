package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// cardSchema describes the args of the card flow's approval.
const cardSchema = `{"type": "object", "required": ["orderId", "amount"],
 "properties": {
  "amount": {"type": "number", "title": "Amount", "minimum": 0.01, "maximum": 10000, "x-interlock-display": "currency", "x-interlock-key": true},
  "currency": {"type": "string", "title": "Currency", "enum": ["USD", "EUR"]},
  "orderId": {"type": "string", "title": "Order", "x-interlock-key": true},
  "customer": {"type": "string", "title": "Customer", "format": "email", "x-interlock-key": true},
  "expedite": {"type": "boolean", "title": "Pay out today"},
  "note": {"type": "string", "title": "Note to the customer", "x-interlock-display": "markdown"}}}`

// cardState is the state of the card flow: what to ask, and what the
// node got.
type cardState struct {
	OrderID     string   `json:"orderId"`
	Amount      float64  `json:"amount"`
	Customer    string   `json:"customer,omitempty"`
	Description string   `json:"description,omitempty"`
	Approvers   int      `json:"approvers,omitempty"`
	Assignees   []string `json:"assignees,omitempty"`
	// RemindSoon reminds two seconds after asking.
	RemindSoon bool `json:"remindSoon,omitempty"`
	// QuorumRoles takes one vote of finance and one of each of them.
	QuorumRoles []string `json:"quorumRoles,omitempty"`
	// TimeoutMinutes is the deadline, an hour when 0; -1 for none.
	TimeoutMinutes int `json:"timeoutMinutes,omitempty"`
	// ReasonToReject makes a reject say why.
	ReasonToReject bool `json:"reasonToReject,omitempty"`

	Verdict  string  `json:"verdict,omitempty"`
	Message  string  `json:"message,omitempty"`
	Approver string  `json:"approver,omitempty"`
	Paid     float64 `json:"paid,omitempty"`
}

// cardFlow is a refund of its own (the example refund flow changes on its
// own): one approval of the finance role with a title, a Markdown
// description, an args schema, a requester, a deadline that escalates to
// finance_lead, and the four decisions; a quorum of the state's approvers.
func cardFlow() *engine.Flow {
	return engine.NewFlow[cardState]("refund").
		Node("review", func(ctx context.Context, n *engine.Node[cardState]) error {
			s := n.State()
			a := engine.Approval{
				Action:       "issue_refund",
				Title:        fmt.Sprintf("Refund %s on order %s", protocol.FormatMoney(s.Amount, "USD"), s.OrderID),
				Description:  s.Description,
				Requester:    "support-bot",
				Reason:       "Refunds over $500 need finance.",
				ApproverRole: "finance",
				Assignees:    s.Assignees,
				Decisions:    []engine.Verdict{"approve", "edit", "reject", "respond"},
				Args: map[string]any{"orderId": s.OrderID, "amount": s.Amount, "currency": "USD", "customer": s.Customer,
					"expedite": false, "note": "We are sorry for the **double charge**."},
				ArgsSchema: json.RawMessage(cardSchema),
				Timeout:    time.Hour,
				OnTimeout:  engine.Escalate("finance_lead", time.Hour, engine.Policy{}),
			}
			if s.Description == "" {
				a.Description = "The customer was **charged twice** for order " + s.OrderID + ".\n\n" +
					"- first charge: captured\n- second charge: captured a minute later\n\nSee [the ticket](https://support.example/tickets/4821)."
			}
			if s.Approvers > 1 {
				a.Quorum = &protocol.Quorum{Required: s.Approvers}
			}
			if s.RemindSoon {
				a.Reminders = []time.Duration{time.Hour - 2*time.Second}
			}
			a.RejectReasonRequired = s.ReasonToReject
			switch {
			case s.TimeoutMinutes < 0:
				a.Timeout, a.OnTimeout = 0, engine.Policy{}
			case s.TimeoutMinutes > 0:
				a.Timeout = time.Duration(s.TimeoutMinutes) * time.Minute
			}
			if len(s.QuorumRoles) > 0 {
				a.Quorum = &protocol.Quorum{Roles: []protocol.RoleCount{{Role: "finance", Count: 1}}}
				for _, r := range s.QuorumRoles {
					a.Quorum.Roles = append(a.Quorum.Roles, protocol.RoleCount{Role: r, Count: 1})
				}
			}
			d, err := n.Approve(ctx, a)
			if err != nil {
				return err
			}
			u := engine.Update{"verdict": string(d.Verdict), "message": d.Message, "approver": d.Approver}
			if d.Approved() {
				u["paid"] = d.Args["amount"]
			}
			return n.Update(u)
		}).
		Start("review").MustBuild()
}

// startCard starts a run of the card flow as caller.
func (s *site) startCard(caller, run string, state map[string]any) {
	s.t.Helper()
	if _, ok := state["customer"]; !ok {
		state["customer"] = "dana@example.com"
	}
	if code, out := s.api(caller, "POST", "/v1/runs/refund", map[string]any{"run": run, "state": state}); code != http.StatusAccepted {
		s.t.Fatalf("start %s = %d %s", run, code, out)
	}
}

// hostileDescription tries every way Markdown has to run script or put
// raw HTML in a page.
const hostileDescription = "Refund **now**.\n\n" +
	"<script>document.body.dataset.pwned = 'script'</script>\n\n" +
	`<img src="x" onerror="document.body.dataset.pwned = 'onerror'">` + "\n\n" +
	"[open the ticket](javascript:document.body.dataset.pwned='link')\n\n" +
	`<div style="position:fixed;inset:0" onclick="document.body.dataset.pwned='div'">raw html</div>` + "\n\n" +
	`<iframe src="https://evil.example/"></iframe>` + "\n\n" +
	"![pixel](javascript:alert(1)) and <a href=\"https://evil.example/\" onmouseover=\"alert(2)\">a raw link</a>"

func TestAHostileDescriptionRendersAsTextWithNoScriptHandlerOrRawHTML(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-evil", map[string]any{"orderId": "o-1", "amount": 900, "description": hostileDescription})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	code, page := ana.do("GET", "/runs/refund/r-evil", nil)
	if code != http.StatusOK {
		t.Fatalf("GET the run = %d\n%s", code, page)
	}
	start := strings.Index(page, `<div class="description">`)
	if start < 0 {
		t.Fatalf("no description on the page:\n%s", page)
	}
	desc := page[start+len(`<div class="description">`):]
	desc = desc[:strings.Index(desc, "</div>\n")]
	if !strings.Contains(desc, "<strong>now</strong>") {
		t.Fatalf("the description's Markdown is not rendered: %s", desc)
	}
	for _, bad := range []string{"<script", "onerror", "javascript:", "onclick", "onmouseover", "<iframe", "<div", "style="} {
		if strings.Contains(strings.ToLower(desc), bad) {
			t.Errorf("the rendered description holds %q:\n%s", bad, desc)
		}
	}
}

func TestAnEditIsMadeInAFieldOfEachArgumentsType(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, nil, cardFlow())
	s.startCard("", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	local := s.visitor()
	_, page := local.do("GET", "/runs/refund/r-1", nil)
	for _, want := range []string{
		`id="arg-amount" name="arg.amount" type="number" inputmode="decimal" value="4800" data-was="4800" min="0.01" max="10000" step="0.01"`,
		`<select id="arg-currency" name="arg.currency"`,
		`<option value="&#34;EUR&#34;">EUR</option>`,
		`id="arg-customer" name="arg.customer" type="email" value="dana@example.com"`,
		`id="arg-expedite" name="arg.expedite" type="checkbox" value="true"`,
		`<textarea id="arg-note" name="arg.note"`,
		`<dt>Amount</dt><dd><span class="money">$4,800.00</span>`,
		`<span class="consequence">then it goes to finance_lead</span>`,
		`Requested by <strong class="requester">support-bot</strong>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("page:\n%s", page)
	}

	edit := func(amount, customer string) (int, string) {
		form := hidden(page)
		form.Set("decision", "edit")
		form.Set("arg.amount", amount)
		form.Set("arg.currency", `"USD"`)
		form.Set("arg.orderId", "o-1")
		form.Set("arg.customer", customer)
		form.Set("arg.note", "We are sorry for the **double charge**.")
		return local.do("POST", "/runs/refund/r-1", form)
	}
	// The engine checks the edit against the schema; its message names the
	// argument and is shown beside its field, the values kept.
	code, out := edit("20000", "dana@example.com")
	if code != http.StatusUnprocessableEntity || !strings.Contains(out, `id="arg-amount-error" role="alert">Amount must be at most 10000.</p>`) ||
		!strings.Contains(out, `id="arg-amount" name="arg.amount" type="number" inputmode="decimal" value="20000"`) {
		t.Fatalf("an edit above the schema's maximum = %d\n%s", code, out)
	}
	// A value that is not of the argument's type is said before sending.
	if code, out = edit("lots", "dana@example.com"); code != http.StatusUnprocessableEntity || !strings.Contains(out, `id="arg-amount-error" role="alert">Amount `) {
		t.Fatalf("an amount that is not a number = %d\n%s", code, out)
	}
	if code, out = edit("4800", "dana@example.com"); code != http.StatusUnprocessableEntity || !strings.Contains(out, "Nothing was changed") {
		t.Fatalf("an edit that changes nothing = %d\n%s", code, out)
	}
	if code, out = edit("400", "dana@example.com"); code != http.StatusOK || !strings.Contains(out, `data-status="completed"`) {
		t.Fatalf("an edit within the schema = %d\n%s", code, out)
	}
	if code, out := s.api("", "GET", "/v1/runs/refund/r-1", nil); code != http.StatusOK || !strings.Contains(string(out), `"paid":400`) {
		t.Fatalf("after the edit the run is %d %s, want paid 400", code, out)
	}
}

// queueRows are the runs of the queue at path, in their order.
func queueRows(t *testing.T, v *browserless, path string) string {
	t.Helper()
	code, page := v.do("GET", path, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d\n%s", path, code, page)
	}
	var runs []string
	for _, part := range strings.Split(page, `class="item`)[1:] {
		i := strings.Index(part, `data-run="`) + len(`data-run="`)
		runs = append(runs, part[i:i+strings.Index(part[i:], `"`)])
	}
	return strings.Join(runs, ",")
}

// TestTheQueueSortsByDeadlineSearchesAndCountsEachView: the soonest
// deadline comes first (none last), or the oldest; a search keeps what
// has every word; each tab says how many it holds under the filters.
func TestTheQueueSortsByDeadlineSearchesAndCountsEachView(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "bot": nil}, cardFlow())
	s.startCard("bot", "r-later", map[string]any{"orderId": "o-1", "amount": 900, "timeoutMinutes": 50})
	s.startCard("bot", "r-none", map[string]any{"orderId": "o-2", "amount": 900, "timeoutMinutes": -1, "customer": "zoe@example.com"})
	s.startCard("bot", "r-soon", map[string]any{"orderId": "o-77", "amount": 1200, "timeoutMinutes": 10, "assignees": []string{"ana"}})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	for path, want := range map[string]string{
		"/":                   "r-soon,r-later,r-none",
		"/?sort=oldest":       "r-later,r-none,r-soon",
		"/?q=o-77":            "r-soon",
		"/?q=ZOE+refund":      "r-none",
		"/?q=o-77+zoe":        "",
		"/?view=mine&q=o-":    "r-soon",
		"/?q=%241%2C200.00":   "r-soon",
		"/?view=roles&q=o-":   "r-soon,r-later,r-none",
		"/?sort=oldest&q=o-1": "r-later",
	} {
		if got := queueRows(t, ana, path); got != want {
			t.Errorf("GET %s lists %q, want %q", path, got, want)
		}
	}
	_, page := ana.do("GET", "/?q=o-", nil)
	for _, want := range []string{`>All <span class="tab-count" data-count="3">3</span>`, `>Mine <span class="tab-count" data-count="1">1</span>`,
		`>My roles <span class="tab-count" data-count="3">3</span>`, `href="/?q=o-&amp;view=mine"`, `3 waiting, soonest deadline first`} {
		if !strings.Contains(page, want) {
			t.Errorf("the queue lacks %s", want)
		}
	}
	_, page = ana.do("GET", "/?q=o-77", nil)
	if !strings.Contains(page, `>All <span class="tab-count" data-count="1">1</span>`) {
		t.Errorf("the counts do not follow the search:\n%s", page)
	}
	if code, page := ana.do("GET", "/?sort=newest", nil); code != http.StatusBadRequest || !strings.Contains(page, "No such order: newest") {
		t.Errorf("an unknown order = %d, want 400 saying so", code)
	}
	if code, _ := ana.do("GET", "/?q="+strings.Repeat("x", 201), nil); code != http.StatusBadRequest {
		t.Errorf("a search of 201 characters = %d, want 400", code)
	}
}

func TestTheQueueSaysWhatIsProposedAndFiltersMineAndMyRoles(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}, "cat": nil}, cardFlow())
	s.startCard("ana", "r-team", map[string]any{"orderId": "o-7", "amount": 4800, "approvers": 2})
	s.startCard("ana", "r-cat", map[string]any{"orderId": "o-8", "amount": 950, "assignees": []string{"cat"}})

	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	_, page := ana.do("GET", "/", nil)
	for _, want := range []string{
		`>Refund $4,800.00 on order o-7</a>`, `<dt>Amount</dt><dd>$4,800.00</dd>`, `<dt>Customer</dt><dd>dana@example.com</dd>`,
		`from support-bot`, `<span class="consequence">, then it goes to finance_lead</span>`, `0 of 2 approvals`, `for cat`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("ana's queue lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("ana's queue:\n%s", page)
	}
	rows := func(v *browserless, path string) string {
		t.Helper()
		code, page := v.do("GET", path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", path, code, page)
		}
		var runs []string
		for _, part := range strings.Split(page, `class="item`)[1:] {
			i := strings.Index(part, `data-run="`) + len(`data-run="`)
			runs = append(runs, part[i:i+strings.Index(part[i:], `"`)])
		}
		return strings.Join(runs, ",")
	}
	if got := rows(ana, "/?view=mine"); got != "" {
		t.Fatalf("ana's own before a claim: %q", got)
	}
	if got := rows(ana, "/?view=roles"); got != "r-team,r-cat" {
		t.Fatalf("ana's roles: %q", got)
	}
	// Ana claims the team's refund with the page's form.
	_, page = ana.do("GET", "/runs/refund/r-team", nil)
	form := hidden(page)
	form.Set("op", "claim")
	if code, out := ana.do("POST", "/runs/refund/r-team/assign", form); code != http.StatusOK || !strings.Contains(out, "You claimed it") ||
		!strings.Contains(out, `id="claimed">by <strong>ana</strong> (you)`) {
		t.Fatalf("ana's claim = %d\n%s", code, out)
	}
	if got := rows(ana, "/?view=mine"); got != "r-team" {
		t.Fatalf("ana's own after her claim: %q", got)
	}

	ben := s.visitor()
	ben.do("POST", "/login", url.Values{"token": {s.tokens["ben"]}, "next": {"/"}})
	if _, page = ben.do("GET", "/", nil); !strings.Contains(page, "claimed by ana") {
		t.Fatalf("ben's queue does not say ana claimed it:\n%s", page)
	}
	// Cat holds no role: she sees what is assigned to her, and nothing
	// else.
	cat := s.visitor()
	cat.do("POST", "/login", url.Values{"token": {s.tokens["cat"]}, "next": {"/"}})
	if got := rows(cat, "/"); got != "r-cat" {
		t.Fatalf("cat's queue: %q", got)
	}
	if got := rows(cat, "/?view=mine"); got != "r-cat" {
		t.Fatalf("cat's own: %q", got)
	}
	if got := rows(cat, "/?view=roles"); got != "" {
		t.Fatalf("cat's roles: %q", got)
	}
	if code, out := cat.do("GET", "/?view=everything", nil); code != http.StatusBadRequest || !strings.Contains(out, "No such view: everything") {
		t.Fatalf("an unknown view = %d\n%s", code, out)
	}
}

func TestTheAssignFormIsRefusedWithoutItsCSRFToken(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	_, page := ana.do("GET", "/runs/refund/r-1", nil)
	form := hidden(page)
	form.Set("op", "claim")
	form.Set("csrf", "forged")
	if code, out := ana.do("POST", "/runs/refund/r-1/assign", form); code != http.StatusForbidden || !strings.Contains(out, "The form has expired") {
		t.Fatalf("a claim with a forged CSRF token = %d\n%s", code, out)
	}
	form.Del("csrf")
	if code, _ := ana.do("POST", "/runs/refund/r-1/assign", form); code != http.StatusForbidden {
		t.Fatalf("a claim without a CSRF token = %d", code)
	}
	if code, out := s.api("ana", "GET", "/v1/runs/refund/r-1", nil); code != http.StatusOK || strings.Contains(string(out), "claimedBy") {
		t.Fatalf("after the refused forms the run is %d %s, want unclaimed", code, out)
	}
}

// A form one process of the deployment served is taken by another, as
// behind a load balancer: the CSRF token is signed with the deployment's
// key, not a key of the process's own.
func TestAFormServedByOneProcessIsTakenByAnother(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	_, page := ana.do("GET", "/runs/refund/r-1", nil)
	form := hidden(page)
	form.Set("op", "claim")
	s.base = s.another() // the cookie for 127.0.0.1 goes to any port
	if code, out := ana.do("POST", "/runs/refund/r-1/assign", form); code != http.StatusOK || !strings.Contains(out, "You claimed it") {
		t.Fatalf("a claim with the form of another process = %d\n%s", code, out)
	}
}

func TestAGateRunsCardShowsTheConversationThatLedToTheCall(t *testing.T) {
	t.Parallel()
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	s := startSiteWith(t, nil, interlock.Config{Flows: []*engine.Flow{cardFlow()}, GateRules: rules})
	long := "Here is the whole story. " + strings.Repeat("The parcel never came and the courier says it was delivered. ", 12)
	msgs, _ := json.Marshal([]map[string]any{
		{"role": "user", "content": "I was charged twice for order o-9, <b>please</b> refund one."},
		{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "Let me check the charges."}}},
		{"role": "user", "content": long},
		{"role": "tool", "content": `{"order": "o-9", "charges": 2, "refundable": true, "lines": [{"sku": "a"}]}`},
	})
	req := protocol.ToolRequest{CallID: "call-9", Tool: "issue_refund", Agent: "support-bot", ConversationID: "conv-9",
		Args: map[string]json.RawMessage{"amount": json.RawMessage("900"), "orderId": json.RawMessage(`"o-9"`)}, Messages: msgs,
		Context: json.RawMessage(`{"customer": "Ada <i>Lovelace</i>", "tier": "gold", "since": 2019}`)}
	if _, err := s.svc.Client("/test").AskTool(t.Context(), req, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	_, page := s.visitor().do("GET", "/runs/gate/call-9", nil)
	for _, want := range []string{
		`<h3 id="conversation-h">The conversation that led here <span class="muted">(4 messages)</span></h3>`,
		// The context the agent sent, as fields, escaped.
		`<h3 id="context-h">Context</h3>`, `<dt>customer</dt><dd>Ada &lt;i&gt;Lovelace&lt;/i&gt;</dd>`, `<dt>tier</dt><dd>gold</dd>`, `<dt>since</dt><dd>2019</dd>`,
		// A tool's JSON result, as fields, not raw JSON.
		`<dl class="arglist tool-fields">`, `<dt>charges</dt><dd>2</dd>`, `<dt>refundable</dt><dd>true</dd>`, `<dt>lines</dt><dd><code class="json">[{&#34;sku&#34;:&#34;a&#34;}]</code></dd>`,
		`Agent <strong>support-bot</strong> · conversation <code>conv-9</code>`,
		`<p class="text">I was charged twice for order o-9, &lt;b&gt;please&lt;/b&gt; refund one.</p>`,
		`<li class="message from-assistant">`, `<p class="text">Let me check the charges.</p>`,
		`<details><summary>Here is the whole story. The parcel never came`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the gate run's page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("page:\n%s", page)
	}
}

// A refusal is a side record, outside the run's audit chain: the run
// page's audit table gives it no number in the chain (it showed 0).
func TestARefusalInTheAuditTableHasNoNumberInTheChain(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "sue": {"support"}}, cardFlow())
	s.startCard("sue", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	// Sue holds no finance role: her approve is refused, and audited.
	if code, out := s.api("sue", "POST", "/v1/runs/refund/r-1/resume", map[string]any{"decision": "approve"}); code != http.StatusForbidden {
		t.Fatalf("sue's approve = %d %s, want 403", code, out)
	}
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	var page string
	natstest.Eventually(t, "the refusal in the audit table", func() bool {
		_, page = ana.do("GET", "/runs/refund/r-1", nil)
		return strings.Contains(page, `<td data-label="Action">refused</td>`)
	})
	rows := regexp.MustCompile(`<tr><td data-label="#">([^<]*|<span[^>]*>[^<]*</span>)</td><td data-label="When"><time[^>]*>[^<]*</time></td><td data-label="Action">(\w+)</td>`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[2]+"="+regexp.MustCompile(`<[^>]*>`).ReplaceAllString(r[1], ""))
	}
	if want := "started=1,refused=–"; !strings.HasPrefix(strings.Join(got, ","), "started=1") || !slices.Contains(got, "refused=–") {
		t.Fatalf("audit rows %v, want %s", got, want)
	}
}

// TestAQuorumsSecondApproverSeesTheRoleTheyDecideInAndTheVotes: a
// finance lead, second of a quorum of finance and finance_lead, reads
// every role that decides, the one they decide in, and the vote so far;
// not "for finance" alone.
func TestAQuorumsSecondApproverSeesTheRoleTheyDecideInAndTheVotes(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "lea": {"finance_lead"}, "bot": nil}, cardFlow())
	s.startCard("bot", "r-q", map[string]any{"orderId": "o-7", "amount": 9000, "quorumRoles": []string{"finance_lead"}})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	_, page := ana.do("GET", "/runs/refund/r-q", nil)
	form := hidden(page)
	form.Set("decision", "approve")
	if code, out := ana.do("POST", "/runs/refund/r-q", form); code != http.StatusOK && code != http.StatusSeeOther {
		t.Fatalf("ana's vote = %d\n%s", code, out)
	}
	lea := s.visitor()
	lea.do("POST", "/login", url.Values{"token": {s.tokens["lea"]}, "next": {"/"}})
	var leaPage string
	natstest.Eventually(t, "ana's vote on lea's page", func() bool {
		_, leaPage = lea.do("GET", "/runs/refund/r-q", nil)
		return strings.Contains(leaPage, "<strong>ana</strong> approved")
	})
	for _, want := range []string{
		`<span>for finance, finance_lead</span>`, `<span class="badge yours">you decide as finance_lead</span>`,
		`<dt>Roles</dt><dd>finance, finance_lead</dd>`, `<dd id="your-role"><strong>finance_lead</strong></dd>`,
		`<strong>1 of 2 approvals</strong>`,
	} {
		if !strings.Contains(leaPage, want) {
			t.Errorf("lea's page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", leaPage)
	}
}

// bulkValues are the values of the queue's bulk checkboxes, by run.
func bulkValues(page string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`<input type="checkbox" class="pick" name="item" value="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		v := html.UnescapeString(m[1])
		out[strings.Fields(v)[1]] = v
	}
	return out
}

// TestABulkDecisionDecidesEachAsTheApproverAndLeavesOutWhatChanged: the
// queue offers a bulk approve or reject of the approvals the caller may
// decide alone; each selected one is decided as a decision of their own,
// bound to the version shown; one decided or changed meanwhile, or one
// whose reject needs a reason, is left out and said so.
func TestABulkDecisionDecidesEachAsTheApproverAndLeavesOutWhatChanged(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}, "bot": nil}, cardFlow())
	for _, run := range []string{"r-1", "r-2", "r-3", "r-4"} {
		s.startCard("bot", run, map[string]any{"orderId": "o-" + run, "amount": 900})
	}
	s.startCard("bot", "r-why", map[string]any{"orderId": "o-why", "amount": 900, "reasonToReject": true})
	s.startCard("bot", "r-two", map[string]any{"orderId": "o-two", "amount": 9000, "approvers": 2})
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	_, page := ana.do("GET", "/", nil)
	values := bulkValues(page)
	if len(values) != 5 || values["r-two"] != "" {
		t.Fatalf("the queue offers %v for a bulk decision, want r-1 to r-4 and r-why, never r-two (it needs another approver)", values)
	}
	form := url.Values{"csrf": {hidden(page).Get("csrf")}, "key": {hidden(page).Get("key")}}

	// Meanwhile ben approves r-2 and claims r-3.
	if code, out := s.api("ben", "POST", "/v1/runs/refund/r-2/resume", map[string]any{"decision": "approve"}); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("ben's approval = %d %s", code, out)
	}
	if code, out := s.api("ben", "POST", "/v1/runs/refund/r-3/assign", map[string]any{"op": "claim"}); code >= 300 {
		t.Fatalf("ben's claim = %d %s", code, out)
	}
	reject := url.Values{"decision": {"reject"}, "item": {values["r-4"], values["r-why"]}}
	for k, v := range form {
		reject[k] = v
	}
	code, out := ana.do("POST", "/bulk", reject)
	if code != http.StatusOK || !strings.Contains(out, `<h1 id="bulk-h">Rejected 1 of 2</h1>`) || !strings.Contains(out, "Rejecting it needs a reason") {
		t.Fatalf("the bulk reject = %d\n%s", code, out)
	}
	approve := url.Values{"decision": {"approve"}, "item": {values["r-1"], values["r-2"], values["r-3"], "garbage"}, "reason": {"checked the ledger"}}
	for k, v := range form {
		approve[k] = v
	}
	code, out = ana.do("POST", "/bulk", approve)
	for _, want := range []string{`<h1 id="bulk-h">Approved 1 of 4</h1>`, `<li data-run="r-1">`, "Already approved by ben", "It changed since the queue showed it", "not a request of the queue"} {
		if code != http.StatusOK || !strings.Contains(out, want) {
			t.Errorf("the bulk approve (%d) lacks %s", code, want)
		}
	}
	if t.Failed() {
		t.Fatalf("page:\n%s", out)
	}
	for run, want := range map[string]string{"r-1": "approve", "r-4": "reject", "r-2": "approve"} {
		natstest.Eventually(t, run+" decided", func() bool {
			cp, err := s.svc.Client("/test").Checkpoint(t.Context(), "refund", run)
			return err == nil && cp.Status == protocol.StatusCompleted && len(cp.Decisions) == 1 && string(cp.Decisions[0].Verdict) == want
		})
	}
	cp, _ := s.svc.Client("/test").Checkpoint(t.Context(), "refund", "r-1")
	if d := cp.Decisions[0]; d.Approver != "ana" || d.Reason != "checked the ledger" {
		t.Errorf("r-1's decision %+v, want ana's own, with her reason", d)
	}
	for _, run := range []string{"r-3", "r-why"} {
		if cp, _ := s.svc.Client("/test").Checkpoint(t.Context(), "refund", run); !cp.Waiting() {
			t.Errorf("%s, left out, is %s", run, cp.Status)
		}
	}
	// The same form again decides nothing twice.
	if _, out = ana.do("POST", "/bulk", approve); !strings.Contains(out, `<h1 id="bulk-h">Approved 0 of 4</h1>`) {
		t.Errorf("the same bulk form sent again:\n%s", out)
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"decision": {"approve"}, "csrf": form["csrf"]}, "Nothing selected"},
		{url.Values{"decision": {"edit"}, "item": {values["r-why"]}, "csrf": form["csrf"]}, "No such decision"},
		{url.Values{"decision": {"approve"}, "item": {values["r-why"]}}, "The form has expired"},
		{url.Values{"decision": {"approve"}, "item": slices.Repeat([]string{values["r-why"]}, 51), "csrf": form["csrf"]}, "Decide at most 50"},
	} {
		if code, out := ana.do("POST", "/bulk", c.form); code < 400 || !strings.Contains(out, c.want) {
			t.Errorf("a bad bulk form %v = %d, want an error saying %q", c.form, code, c.want)
		}
	}
}
