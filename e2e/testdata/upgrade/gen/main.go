// Command upgradegen writes, with the build of Interlock it is compiled
// in, a data dir holding runs that wait: a gate call, an ask, a refund's
// approval and a booking's question.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/protocol"
)

var secret = []byte("natstest-secret-natstest-secret-0123456789")

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := context.Background()
	srv, err := bus.StartServer(ctx, bus.ServerConfig{DataDir: dir, Port: -1, WorkersPassword: "natstest-workers"})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	// The example rules, with deadlines far off: the runs wait until a
	// test decides them, whenever it runs.
	src, err := os.ReadFile(examples.GateRulesFile)
	if err != nil {
		return err
	}
	rules, err := gate.Parse([]byte(strings.ReplaceAll(string(src), "timeout: 30m", "timeout: 87600h")), examples.GateRulesFile)
	if err != nil {
		return err
	}
	conn := srv.WorkerConn()
	conn.InProcess = nil
	svc, err := interlock.Start(ctx, interlock.Config{Flows: examples.Flows(), Secret: secret, GateRules: rules, Conn: conn, Instance: "previous"})
	if err != nil {
		return err
	}
	c := svc.Client("/upgradegen")
	answer, err := c.AskTool(ctx, protocol.ToolRequest{CallID: "c-before", Tool: "issue_refund", Agent: "support-bot",
		Args: map[string]json.RawMessage{"amount": json.RawMessage(`900`), "orderId": json.RawMessage(`"o-9"`)}}, 10*time.Second)
	if err != nil || answer.Pending == nil {
		return fmt.Errorf("gate call: %v %+v", err, answer)
	}
	if _, err := c.Ask(ctx, protocol.AskRequest{AskID: "ask-before", Agent: "support-bot",
		Interrupt: protocol.AskInterrupt{Kind: "approval", Title: "Refund $120.00", Action: "issue_refund",
			Args: json.RawMessage(`{"amount": 120}`), ApproverRole: "supervisor", Timeout: "87600h"}}, 0); err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	state := map[string]json.RawMessage{"orderId": json.RawMessage(`"o-7"`), "amount": json.RawMessage(`4800`),
		"currency": json.RawMessage(`"USD"`), "last4": json.RawMessage(`"4821"`), "approvalTimeoutSeconds": json.RawMessage(`315360000`)}
	if _, err := c.Start(ctx, "refund", "r-before", state, nil); err != nil {
		return fmt.Errorf("refund: %w", err)
	}
	if _, err := c.Start(ctx, "booking", "b-before", map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)}, nil); err != nil {
		return fmt.Errorf("booking: %w", err)
	}
	for _, r := range [][2]string{{"gate", "c-before"}, {"ask", "ask-before"}, {"refund", "r-before"}, {"booking", "b-before"}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := c.LastInterrupt(ctx, r[0], r[1]); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s %s does not wait", r[0], r[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return svc.Stop(ctx)
}
