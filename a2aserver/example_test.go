package a2aserver_test

import (
	"context"
	"log"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/a2aserver"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/httpapi"
)

// A service of one's own serves the A2A agent on its HTTP API, as
// interlock serve does: the card at /.well-known/agent-card.json, the
// methods at /a2a.
func Example() {
	ctx := context.Background()
	svc, err := interlock.Start(ctx, interlock.Config{Flows: examples.Flows(), Embedded: &bus.ServerConfig{DataDir: "interlock-data"}})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Stop(ctx)
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:8080"})
	if err != nil {
		log.Fatal(err)
	}
	agent, err := a2aserver.New(svc, a2aserver.Config{PublicURL: api.PublicURL})
	if err != nil {
		log.Fatal(err)
	}
	agent.Register(api)
	// Started with the service, it sends the push notifications.
	if err := svc.Attach(ctx, agent); err != nil {
		log.Fatal(err)
	}
	if err := svc.Attach(ctx, api); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
}
