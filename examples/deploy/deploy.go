// Package deploy runs one build of the payout service of examples/deploy:
// a worker process of a deployment whose NATS server is elsewhere (an
// `interlock serve`, a cluster), running the payout flow of its build.
// Builds v1 and v2 of the flow run side by side during a rolling deploy;
// README.md walks one.
package deploy

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/wire"
)

// Main runs flow until SIGINT or SIGTERM, which drain the work in hand,
// and exits: 0 once stopped, 1 on an error.
func Main(flow *engine.Flow) {
	url := flag.String("nats-url", "nats://127.0.0.1:4222", "the NATS `url` of the deployment")
	user := flag.String("nats-user", bus.DefaultWorkersUser, "the `user` the workers authenticate as, with the password in INTERLOCK_WORKERS_PASSWORD")
	instance := flag.String("instance", "payout-"+flow.Version(), "this process's `name` in the logs and in interlock flows")
	ackWait := flag.Duration("ack-wait", bus.DefaultAckWait, "how long a command may be in this process's hands before another worker gets it (`duration`)")
	flag.Parse()
	log := zerolog.New(os.Stderr).With().Timestamp().Str("instance", *instance).Logger()
	conn := wire.ConnConfig{URL: *url, User: *user, Password: os.Getenv("INTERLOCK_WORKERS_PASSWORD"), Name: *instance}
	if err := run(log, flow, conn, *instance, *ackWait); err != nil {
		log.Error().Err(err).Msg("payout service failed")
		os.Exit(1)
	}
}

func run(log zerolog.Logger, flow *engine.Flow, conn wire.ConnConfig, instance string, ackWait time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows: []*engine.Flow{flow}, Conn: conn, Instance: instance, Logger: &log, AckWait: ackWait,
	})
	if err != nil {
		return err
	}
	log.Info().Str("flow", flow.Name()).Str("version", flow.Version()).Str("nats", conn.URL).
		Msg(fmt.Sprintf("serving flow %s version %s; Ctrl-C drains", flow.Name(), flow.Version()))
	<-ctx.Done()
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.Stop(drain); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
