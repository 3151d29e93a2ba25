package mcpserver_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/mcpserver"
)

// contractState is the state of the contract flow of these tests.
type contractState struct {
	Verdict string `json:"verdict,omitempty"`
	Message string `json:"message,omitempty"`
}

// contractFlow asks a supervisor to approve send_contract, or to respond
// to whoever proposed it; decisions are the approval's.
func contractFlow(decisions ...engine.Verdict) *engine.Flow {
	return engine.NewFlow[contractState]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[contractState]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"customer": "Acme"},
				ApproverRole: "supervisor", Decisions: decisions})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict), "message": d.Message})
		}).
		Start("review").
		MustBuild()
}

// connectFlows starts a service of flows and an MCP server on it with
// cfg, and connects a client to it.
func connectFlows(t *testing.T, cfg mcpserver.Config, flows ...*engine.Flow) *model {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: flows, Secret: natstest.Secret})
	s, err := mcpserver.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return session(t, svc, s)
}

func TestContinueFlowRespondsWithAMessageWhereTheApprovalListsRespond(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		name := "vouched"
		if keep {
			name = "tokens kept by the server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := connectFlows(t, mcpserver.Config{Flows: []mcpserver.Flow{{Name: "contract"}}, KeepTokens: keep, Approver: "ann", Roles: []string{"supervisor"}},
				contractFlow(engine.VerdictApprove, engine.VerdictRespond))
			var r mcpserver.RunResult
			m.call("start_flow", args{"flow": "contract"}, &r)
			wantStatus(t, r, mcpserver.StatusInterrupt)
			if !slices.Contains(r.Interrupt.Decisions, "respond") || !strings.Contains(r.Next, "respond (with message") {
				t.Fatalf("the interrupt does not offer respond: %+v, next %q", r.Interrupt, r.Next)
			}
			if msg := m.fail("continue_flow", args{"flow": "contract", "run": r.Run, "decision": "respond"}); !strings.Contains(msg, "needs a message") {
				t.Fatalf("respond without a message: %s", msg)
			}
			if msg := m.fail("continue_flow", args{"flow": "contract", "run": r.Run, "decision": "approve", "message": "hi"}); !strings.Contains(msg, "only with decision respond") {
				t.Fatalf("approve with a message: %s", msg)
			}
			m.call("continue_flow", args{"flow": "contract", "run": r.Run, "decision": "respond", "message": "Use the 2026 template."}, &r)
			wantStatus(t, r, mcpserver.StatusCompleted)
			if r.State["verdict"] != "respond" || r.State["message"] != "Use the 2026 template." {
				t.Fatalf("final state %+v", r.State)
			}
		})
	}
}

func TestContinueFlowRefusesRespondWhereTheApprovalListsNone(t *testing.T) {
	t.Parallel()
	m := connectFlows(t, mcpserver.Config{Flows: []mcpserver.Flow{{Name: "contract"}}, Approver: "ann", Roles: []string{"supervisor"}},
		contractFlow())
	var r mcpserver.RunResult
	m.call("start_flow", args{"flow": "contract"}, &r)
	wantStatus(t, r, mcpserver.StatusInterrupt)
	msg := m.fail("continue_flow", args{"flow": "contract", "run": r.Run, "decision": "respond", "message": "hi"})
	if !strings.Contains(msg, `decision "respond" is not allowed here`) || !strings.Contains(msg, "approve") {
		t.Fatalf("respond where none is listed: %s", msg)
	}
}
