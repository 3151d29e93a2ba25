package client_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
)

// natsURL is where the examples find Interlock: a service with the example
// flows on an embedded server, started for this package's tests.
var natsURL string

// TestMain runs the examples' service around the tests, and checks that
// nothing is left running afterwards.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "interlock-client-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:    examples.Flows(),
		Embedded: &bus.ServerConfig{DataDir: dir, Host: "127.0.0.1", Port: -1, LazyFsync: true},
		Secret:   natstest.Secret,
		Instance: "example",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the examples' service:", err)
		return 1
	}
	natsURL = svc.URL()
	code := m.Run()
	if err := svc.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the examples' service:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
