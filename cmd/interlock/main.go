// Command interlock runs Interlock and talks to it.
//
//	interlock serve                      run workers on an embedded NATS server
//	interlock start booking              start a run
//	interlock pending                    list runs waiting on an interrupt
//	interlock runs --status finished     list finished runs, newest first, and how each ended
//	interlock show booking r-42          show a run's checkpoint
//	interlock events booking r-42        show a run's events
//	interlock answer booking r-42 email=ann@example.com
//	interlock answer refund r-7 --edit amount=400 --reason "partial refund"
//	interlock assign claim refund r-7   claim a pending approval: only you may decide it
//	interlock cancel booking r-42
//	interlock audit refund r-7           show a run's audit history
//	interlock audit verify refund r-7    check its signatures and hash chain
//	interlock audit key                  print the audit records' public keys
//	interlock webhooks deliveries        show outbound webhook deliveries, newest first
//	interlock mcp                        serve flows to a model over MCP (stdio)
//	interlock version                    print the version, commit, Go and nats-server
//
// Run `interlock help` for every flag. Exit codes: 0 done or advanced, 1
// failed (also: audit verify cannot vouch for every record), 2 bad usage
// (also: serve refused a listener beyond loopback without authentication),
// 3 refused, 4 asked again, 5 cannot reach the server.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
