package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// A bot starts a run of the example flow booking, shows the question it
// pauses on, answers it with the resume token of the interrupted event, and
// reads the run's checkpoint.
func Example() {
	ctx := context.Background()
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: natsURL, Name: "example-bot"})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc, js, wire.Names{}, "/examples/bot", 0)

	ev, err := c.Start(ctx, "booking", "r-example", map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)}, nil)
	if err != nil {
		log.Fatal(err)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Kind, "at", in.Node+":", in.Questions[0].Question)

	ev, err = c.Resume(ctx, "booking", "r-example", protocol.Resume{
		ResumeToken: in.ResumeToken,
		Answers:     map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := ev.Decode(&in); err != nil {
		log.Fatal(err)
	}
	// The name was given at start, so only the phone is asked.
	fmt.Println(ev.Kind, "at", in.Node, "for", in.Fields())

	cp, err := c.Checkpoint(ctx, "booking", "r-example")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("run", cp.Run, "is", cp.Status, "at", cp.Node)
	// Output:
	// interrupted at ask_email: What's your email?
	// interrupted at ask_contact for [phone]
	// run r-example is waiting at ask_contact
}

// A resume sent twice with the same idempotency key has its effect once;
// the repeat reports the run as it stands.
func ExampleClient_Resume_idempotencyKey() {
	ctx := context.Background()
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: natsURL, Name: "example-bot"})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc, js, wire.Names{}, "/examples/bot", 0)

	if _, err := c.Start(ctx, "booking", "r-once", map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)}, nil); err != nil {
		log.Fatal(err)
	}
	in, err := c.LastInterrupt(ctx, "booking", "r-once")
	if err != nil {
		log.Fatal(err)
	}
	answer := protocol.Resume{
		ResumeToken:    in.ResumeToken,
		Answers:        map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
		IdempotencyKey: "slack-action-1",
	}
	for range 2 {
		ev, err := c.Resume(ctx, "booking", "r-once", answer)
		if err != nil {
			log.Fatal(err)
		}
		if ev.Repeat {
			fmt.Println("already applied; the run is", ev.Current.Status, "at", ev.Current.Node)
			continue
		}
		fmt.Println(ev.Kind)
	}
	// Output:
	// interrupted
	// already applied; the run is waiting at ask_contact
}

// A supervisor approves a refund; its audit records are read back and
// their hash chain checked against the run's checkpoint.
func ExampleClient_VerifyAudit() {
	ctx := context.Background()
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: natsURL, Name: "example-auditor"})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc, js, wire.Names{}, "/examples/inbox", 0)

	state := map[string]json.RawMessage{"orderId": json.RawMessage(`"o-7"`), "amount": json.RawMessage(`900`)}
	if _, err := c.Start(ctx, "refund", "r-audited", state, nil); err != nil {
		log.Fatal(err)
	}
	for _, r := range []protocol.Resume{
		{Answers: map[string]json.RawMessage{"last4": json.RawMessage(`"1234"`)}},
		{Decision: "approve", Approver: "sam@example.com", Reason: "matches ticket 4821"},
	} {
		in, err := c.LastInterrupt(ctx, "refund", "r-audited")
		if err != nil {
			log.Fatal(err)
		}
		r.ResumeToken = in.ResumeToken
		if _, err := c.Resume(ctx, "refund", "r-audited", r); err != nil {
			log.Fatal(err)
		}
	}

	recs, err := c.Audit(ctx, "refund", "r-audited")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.Seq, r.Action, r.By)
		if r.Paused() {
			// The transition paused the run: its outcome says on what.
			o, role := r.Outcome, ""
			if o.ApproverRole != "" {
				role = ", for " + o.ApproverRole
			}
			fmt.Printf("  paused: %s at %s%s\n", o.Kind, o.Node, role)
		}
	}
	rep, err := c.VerifyAudit(ctx, "refund", "r-audited")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("intact:", rep.Intact, "records:", rep.Records, "head is the checkpoint's:", rep.HeadCompared && *rep.Checkpoint == rep.Head)
	// Output:
	// 1 started /examples/inbox
	//   paused: question at verify_identity
	// 2 answered /examples/inbox
	//   paused: approval at review, for supervisor
	// 3 approved sam@example.com
	// intact: true records: 3 head is the checkpoint's: true
}
