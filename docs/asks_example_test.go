package docs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// askAddress asks a person for a delivery address (docs/asks.md, Go), and
// waits up to five minutes for the answer.
func askAddress(ctx context.Context, c *client.Client) (string, error) {
	ans, err := c.Ask(ctx, protocol.AskRequest{
		AskID: "ask-7f3", Agent: "support-bot",
		Interrupt: protocol.AskInterrupt{Kind: "question", Title: "Delivery address",
			Questions: []protocol.Question{{Field: "address", Question: "Where should we ship it?",
				Schema: json.RawMessage(`{"type": "string", "minLength": 10}`)}}},
	}, 5*time.Minute)
	if err != nil {
		return "", err
	}
	if ans.Answered == nil || ans.Answered.Status != protocol.AskAnswered {
		return "", fmt.Errorf("no address: %+v", ans)
	}
	var address string
	err = json.Unmarshal(ans.Answered.Answers["address"], &address)
	return address, err
}

func TestTheDocsGoAskWaitsForThePersonsAnswer(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	c := svc.Client("docs")
	type result struct {
		address string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		a, err := askAddress(t.Context(), c)
		done <- result{a, err}
	}()
	// A person answers in the inbox; here, the test over NATS.
	var in protocol.Interrupted
	natstest.Eventually(t, "the ask's interrupt", func() bool {
		var err error
		in, err = c.LastInterrupt(t.Context(), "ask", "ask-7f3")
		return err == nil
	})
	if _, err := c.Resume(t.Context(), "ask", "ask-7f3", protocol.Resume{ResumeToken: in.ResumeToken,
		Answers: map[string]json.RawMessage{"address": json.RawMessage(`"1 Main Street, Springfield"`)}}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.address != "1 Main Street, Springfield" {
		t.Fatalf("askAddress = %q, %v", r.address, r.err)
	}
}
