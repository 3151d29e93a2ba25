// Command interlock runs Interlock and talks to it.
//
//	interlock serve                      run workers on an embedded NATS server
//	interlock start booking              start a run
//	interlock pending                    list runs waiting on an interrupt
//	interlock show booking r-42          show a run's checkpoint
//	interlock answer booking r-42 email=ann@example.com
//	interlock cancel booking r-42
//
// Run `interlock help` for every flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(os.Stderr, "interlock: %v\n", err)
		os.Exit(2)
	}
	if !errors.Is(err, errReported) {
		fmt.Fprintf(os.Stderr, "interlock: %v\n", err)
	}
	os.Exit(1)
}
