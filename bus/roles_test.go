package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// securityTable reads the table of docs/operations.md that says what each
// client may do: the action's id (its first backquoted word), then, by
// user, "yes", "no", "no effect" or "own only".
func securityTable(t *testing.T) (users []string, rows map[string]map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| action | anonymous | agent | bot | operator | why |")
	if !ok {
		t.Fatal("docs/operations.md has no security table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	users = []string{"anonymous", "agent", "bot", "operator"}
	rows = map[string]map[string]string{}
	id := regexp.MustCompile("^`([a-z.-]+)`")
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			t.Fatalf("security table row %q has %d cells, want 6", line, len(cells))
		}
		m := id.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			t.Fatalf("security table row %q does not start with an action id in backquotes", line)
		}
		rows[m[1]] = map[string]string{}
		for i, u := range users {
			rows[m[1]][u] = strings.TrimSpace(cells[i+1])
		}
	}
	return users, rows
}

// rolesFlows are the flows the security table is tried on: a question,
// and approvals for two roles.
func rolesFlows() []*engine.Flow {
	question := engine.NewFlow[map[string]any]("q").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "note", Question: "Note?"}}})
			return err
		}).Start("ask").MustBuild()
	approval := func(flow, role string) *engine.Flow {
		return engine.NewFlow[map[string]any](flow).
			Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
				_, err := n.Approve(ctx, engine.Approval{Action: "act", Args: map[string]any{"n": 1}, ApproverRole: role})
				return err
			}).Start("review").MustBuild()
	}
	return []*engine.Flow{question, approval("sup", "supervisor"), approval("fin", "finance_lead")}
}

// roleAction is one row of the security table, as the test tries it.
type roleAction struct {
	// subject is the first subject the action needs, named in the server's
	// permissions violation when the user may not.
	subject string
	// do tries the action; nil means it was done.
	do func(ctx context.Context) error
	// noEffect, for a "no effect" cell, checks that it was taken but did
	// nothing.
	noEffect func(t *testing.T)
}

// TestEachClientMayDoWhatTheSecurityTableSays tries every row of the
// security table of docs/operations.md as every client user: the deploy
// configuration's agent, bot and operator, and a default install's
// anonymous user. A "yes" must work; a "no" must be refused by the server
// with a permissions violation.
func TestEachClientMayDoWhatTheSecurityTableSays(t *testing.T) {
	users, rows := securityTable(t)

	tlsFiles, pw := deployEnv(t)
	n, _ := wire.NewNames("")
	deploySvc, err := interlock.Start(t.Context(), interlock.Config{
		Flows: rolesFlows(), Instance: "test", Concurrency: 4, RequireRoles: true, Secret: natstest.Secret,
		Embedded: &bus.ServerConfig{
			ConfigFile: "../deploy/nats-server.conf", DataDir: t.TempDir(), Host: "127.0.0.1", Port: -1, LazyFsync: true,
			WorkersPassword: os.Getenv("INTERLOCK_WORKERS_PASSWORD"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deploySvc.Stop(context.WithoutCancel(t.Context())) })
	srv := natstest.StartServer(t, "")
	defaultSvc := natstest.StartWith(t, srv, interlock.Config{Flows: rolesFlows(), Secret: natstest.Secret})
	_, admin := natstest.Connect(t, srv.ClientURL())

	var runs atomic.Int64
	for _, name := range users {
		t.Run(name, func(t *testing.T) {
			svc := deploySvc
			var u *user
			if name == "anonymous" {
				svc = defaultSvc
				u = connectUser(t, name, srv.ClientURL())
			} else {
				u = connectUser(t, name, deploySvc.URL(), nats.UserInfo(name, pw[name]), nats.RootCAs(tlsFiles.CA))
			}
			c := client.New(u.nc, u.js, n, "/test/"+name, natstest.Wait)
			workers := svc.Client("/test/workers")
			// waiting starts a run of flow as the workers and returns its
			// pending interrupt.
			waiting := func(flow string) protocol.Interrupted {
				t.Helper()
				run := fmt.Sprintf("r-%d", runs.Add(1))
				if ev, err := workers.Start(t.Context(), flow, run, nil, nil); err != nil || ev.Kind != protocol.EventInterrupted {
					t.Fatalf("start %s: %s %v", flow, ev.Kind, err)
				}
				return lastInterruptOf(t, workers, flow, run)
			}
			settled := func(ev client.Event, err error, want string) error {
				if err != nil {
					return err
				}
				if ev.Kind != want {
					var r protocol.Refused
					_ = ev.Decode(&r)
					return fmt.Errorf("settled with %s (%s: %s), want %s", ev.Kind, r.Code, r.Message, want)
				}
				return nil
			}
			req := func(subject, body string) func(context.Context) error { return request(u.nc, subject, body) }
			sub := func(subject string) func(context.Context) error {
				return func(ctx context.Context) error {
					s, err := u.nc.SubscribeSync(subject)
					if err != nil {
						return err
					}
					defer func() { _ = s.Unsubscribe() }()
					// The server's refusal comes before the flush's answer.
					if err := u.nc.FlushWithContext(ctx); err != nil {
						return err
					}
					if _, err := s.NextMsg(time.Millisecond); errors.Is(err, nats.ErrPermissionViolation) {
						return err
					}
					return nil
				}
			}
			actions := map[string]roleAction{
				"start": {n.In("q", "start"), func(ctx context.Context) error {
					ev, err := c.Start(ctx, "q", fmt.Sprintf("r-%d", runs.Add(1)), nil, nil)
					return settled(ev, err, protocol.EventInterrupted)
				}, nil},
				"answer": {n.In("q", "resume"), func(ctx context.Context) error {
					in := waiting("q")
					ev, err := c.Resume(ctx, "q", in.Run, protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"note": json.RawMessage(`"n"`)}})
					return settled(ev, err, protocol.EventCompleted)
				}, nil},
				"approve-supervisor": {n.ResumeAs("sup", "supervisor"), func(ctx context.Context) error {
					in := waiting("sup")
					ev, err := c.ResumeWithRole(ctx, "sup", in.Run, "supervisor", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"})
					return settled(ev, err, protocol.EventCompleted)
				}, nil},
				"approve-other-role": {n.ResumeAs("fin", "finance_lead"), func(ctx context.Context) error {
					in := waiting("fin")
					ev, err := c.ResumeWithRole(ctx, "fin", in.Run, "finance_lead", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"})
					return settled(ev, err, protocol.EventCompleted)
				}, nil},
				"cancel": {n.In("q", "cancel"), func(ctx context.Context) error {
					in := waiting("q")
					ev, err := c.Cancel(ctx, "q", in.Run, "test")
					return settled(ev, err, protocol.EventCancelled)
				}, nil},
				"assign": {n.In("sup", "assign"), func(ctx context.Context) error {
					in := waiting("sup")
					ev, err := c.Assign(ctx, "sup", in.Run, protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ana"})
					return settled(ev, err, protocol.EventAssigned)
				}, nil},
				"reannounce": {n.In("q", "reannounce"), func(ctx context.Context) error {
					in := waiting("q")
					ev, err := c.Reannounce(ctx, "q", in.Run, "test")
					return settled(ev, err, protocol.EventInterrupted)
				}, nil},
				"request":          {n.GateRequest(), publish(u.js, n.GateRequest()), nil},
				"consume":          {n.GateConsume(), publish(u.js, n.GateConsume()), nil},
				"ask":              {n.AskRequest(), publish(u.js, n.AskRequest()), nil},
				"expire":           {n.In("q", "expire"), publish(u.js, n.In("q", "expire")), nil},
				"publish-deadline": {n.Due("q", "expire"), publish(u.js, n.Due("q", "expire")), nil},
				"watch-events": {n.Prefix + ".ev.>", func(ctx context.Context) error {
					s, err := u.nc.SubscribeSync(n.Event("q", "*", protocol.EventStarted))
					if err != nil {
						return err
					}
					defer func() { _ = s.Unsubscribe() }()
					if err := u.nc.FlushWithContext(ctx); err != nil {
						return err
					}
					waiting("q")
					_, err = s.NextMsgWithContext(ctx)
					return err
				}, nil},
				"read-events": {"$JS.API.DIRECT.GET." + n.EventStream(), func(ctx context.Context) error {
					waiting("q") // an event to read, whichever action comes first
					return req("$JS.API.DIRECT.GET."+n.EventStream(), `{"last_by_subj":"`+n.Prefix+`.ev.>"}`)(ctx)
				}, nil},
				"read-checkpoints": {"$JS.API.STREAM.INFO.KV_" + n.RunsBucket(), func(ctx context.Context) error { _, err := c.Checkpoint(ctx, "q", waiting("q").Run); return err }, nil},
				"list-pending":     {"$JS.API.DIRECT.GET.KV_" + n.PendingBucket(), func(ctx context.Context) error { _, err := c.ListPending(ctx, client.PendingQuery{}); return err }, nil},
				"list-runs": {"$JS.API.STREAM.INFO." + n.FinishedStream("completed"), func(ctx context.Context) error {
					waiting("q")
					page, err := c.ListRuns(ctx, client.RunsQuery{})
					if err == nil && len(page.Items) == 0 {
						err = errors.New("listed no run, with a run waiting")
					}
					return err
				}, nil},
				"read-audit": {"$JS.API.DIRECT.GET." + n.AuditStream(), func(ctx context.Context) error {
					waiting("q") // a record to read, whichever action comes first
					if err := req("$JS.API.DIRECT.GET."+n.AuditStream(), `{"last_by_subj":"`+n.Prefix+`.audit.>"}`)(ctx); err != nil {
						return err
					}
					return sub(n.Prefix + ".audit.>")(ctx)
				}, nil},
				"read-dead-letters": {"$JS.API.STREAM.MSG.GET." + n.DeadLetterStream(), func(ctx context.Context) error {
					if err := req("$JS.API.STREAM.MSG.GET."+n.DeadLetterStream(), `{"last_by_subj":"`+n.Prefix+`.dlq.>"}`)(ctx); err != nil {
						return err
					}
					return sub(n.Prefix + ".dlq.>")(ctx)
				}, nil},
				"direct-get-dead-letters": {"$JS.API.DIRECT.GET." + n.DeadLetterStream(), req("$JS.API.DIRECT.GET."+n.DeadLetterStream(), `{"seq":1}`), nil},
				"read-deadlines":          {"$JS.API.STREAM.INFO." + n.ScheduleStream(), req("$JS.API.STREAM.INFO."+n.ScheduleStream(), ""), nil},
				"read-config":             {"$JS.API.STREAM.INFO.KV_" + n.ConfigBucket(), req("$JS.API.STREAM.INFO.KV_"+n.ConfigBucket(), ""), nil},
				"read-audit-keys": {"$JS.API.DIRECT.GET.KV_" + n.ConfigBucket() + ".$KV." + n.ConfigBucket() + "." + protocol.AuditKeysKey, func(ctx context.Context) error {
					keys, err := c.AuditKeys(ctx)
					if err == nil && len(keys) == 0 {
						err = errors.New("read no audit key")
					}
					return err
				}, nil},
				"write-config":  {"$KV." + n.ConfigBucket() + ".gate.rules", publish(u.js, "$KV."+n.ConfigBucket()+".gate.rules"), nil},
				"backlog":       {"$JS.API.CONSUMER.INFO." + n.InStream() + "." + n.Consumer(), req("$JS.API.CONSUMER.INFO."+n.InStream()+"."+n.Consumer(), ""), nil},
				"read-commands": {n.Prefix + ".in.>", sub(n.Prefix + ".in.>"), nil},
				"read-keys":     {"$JS.API.STREAM.INFO.KV_" + n.KeysBucket(), req("$JS.API.STREAM.INFO.KV_"+n.KeysBucket(), ""), nil},
				"read-webhook-deliveries": {"$JS.API.STREAM.INFO.KV_" + n.WebhookDeliveriesBucket(),
					req("$JS.API.STREAM.INFO.KV_"+n.WebhookDeliveriesBucket(), ""), nil},
				"read-workers": {"$JS.API.DIRECT.GET.KV_" + n.WorkersBucket(), func(ctx context.Context) error {
					_, err := c.Workers(ctx)
					return err
				}, nil},
				"read-links": {"$JS.API.STREAM.INFO.KV_" + n.LinksBucket(), func(ctx context.Context) error {
					if err := req("$JS.API.STREAM.INFO.KV_"+n.LinksBucket(), "")(ctx); err != nil {
						return err
					}
					return req("$JS.API.DIRECT.GET.KV_"+n.SentBucket(), `{"seq":1}`)(ctx)
				}, nil},
				"read-secrets": {"$JS.API.DIRECT.GET.KV_" + n.ConfigBucket() + ".$KV." + n.ConfigBucket() + ".people",
					req("$JS.API.DIRECT.GET.KV_"+n.ConfigBucket()+".$KV."+n.ConfigBucket()+".people", ""), nil},
				"write-stores":    {"$KV." + n.RunsBucket() + ".q.r-forged", publish(u.js, "$KV."+n.RunsBucket()+".q.r-forged"), nil},
				"manage-streams":  {"$JS.API.STREAM.PURGE." + n.EventStream(), req("$JS.API.STREAM.PURGE."+n.EventStream(), ""), nil},
				"create-consumer": {"$JS.API.CONSUMER.CREATE." + n.EventStream(), req("$JS.API.CONSUMER.CREATE."+n.EventStream(), `{"stream_name":"`+n.EventStream()+`","config":{"ack_policy":"none"}}`), nil},
				"others-replies":  {bus.WorkerInboxPrefix(n) + ".>", sub(bus.WorkerInboxPrefix(n) + ".>"), nil},
			}
			// An expire sent to the inbound stream is dead-lettered,
			// and nothing expires.
			exp := actions["expire"]
			exp.noEffect = func(t *testing.T) {
				natstest.WaitFor(t, admin, n.DeadLetterStream(), n.DeadLetter(bus.ReasonUnknownSubject), func(rs []natstest.Received) bool {
					for _, r := range rs {
						if r.Header.Get(bus.HeaderSubject) == n.In("q", "expire") {
							return true
						}
					}
					return false
				})
			}
			actions["expire"] = exp
			for id := range rows {
				if _, ok := actions[id]; !ok {
					t.Errorf("the security table has a row %q this test does not try", id)
				}
			}
			for id := range actions {
				if _, ok := rows[id]; !ok {
					t.Errorf("the test tries %q, which the security table lacks", id)
				}
			}
			for id, a := range actions {
				cell := rows[id][name]
				ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
				switch cell {
				case "yes":
					if err := a.do(ctx); err != nil {
						t.Errorf("%s may %s, the table says, but: %v", name, id, err)
					}
				case "no effect":
					if err := a.do(ctx); err != nil {
						t.Errorf("%s: %s: %v", name, id, err)
					}
					a.noEffect(t)
				case "own only":
					// Its own replies: the anonymous user's are on _INBOX.
					if err := sub("_INBOX.>")(ctx); err != nil {
						t.Errorf("%s may read its own replies, but: %v", name, err)
					}
					u.denied(t, id, a.subject, a.do)
				case "no":
					u.denied(t, id, a.subject, a.do)
				default:
					t.Errorf("the security table says %q for %s and %s", cell, id, name)
				}
				cancel()
			}
		})
	}
}
