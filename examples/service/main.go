// Command service runs a flow of its own on Interlock, as a program of
// one's own would: an embedded NATS server, the workers, the HTTP API with
// the web inbox, Prometheus metrics and structured logs. The first Ctrl-C
// (or SIGTERM) drains the work in hand; a second stops at once.
//
//	go run ./examples/service
//
// docs/flows.md ("Running flows") walks through it.
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/people"
)

// Claim is the state of an expense claim.
type Claim struct {
	Employee string  `json:"employee"`
	Amount   float64 `json:"amount"`
	Outcome  string  `json:"outcome,omitempty"`
}

// claims pays an expense claim; one over 100 waits for a manager's approval.
var claims = engine.NewFlow[Claim]("expense").
	Node("review", func(ctx context.Context, n *engine.Node[Claim]) error {
		c := n.State()
		if c.Amount > 100 {
			d, err := n.Approve(ctx, engine.Approval{
				Action: "pay", Args: map[string]any{"employee": c.Employee, "amount": c.Amount},
				Reason: "Claims over 100 need a manager.", ApproverRole: "manager",
			})
			if err != nil {
				return err // engine.ErrInterrupted while it waits
			}
			if !d.Approved() {
				return n.Set("outcome", "rejected")
			}
		}
		return n.Set("outcome", "paid")
	}).
	Start("review").
	MustBuild()

func main() {
	listen := flag.String("listen", "127.0.0.1:4222", "`host:port` of the embedded NATS server")
	httpAddr := flag.String("http", httpapi.DefaultAddr, "`host:port` of the HTTP API and the inbox")
	peopleFile := flag.String("people", "", "`file` of the directory of people: the API's callers, their roles and tokens (interlock people add); without it, loopback only")
	metricsAddr := flag.String("metrics", metrics.DefaultAddr, "`host:port` of /metrics, /healthz and /readyz")
	dataDir := flag.String("data-dir", "service-data", "`dir` of the embedded server's data")
	flag.Parse()
	log := zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger() // JSON lines
	if err := run(log, *listen, *httpAddr, *peopleFile, *metricsAddr, *dataDir); err != nil {
		log.Error().Err(err).Msg("service failed")
		os.Exit(1)
	}
}

func run(log zerolog.Logger, listen, httpAddr, peopleFile, metricsAddr, dataDir string) (err error) {
	// The first Ctrl-C or SIGTERM ends ctx.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	nport, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	var dir *people.Directory // none: the local user, on loopback only
	if peopleFile != "" {
		if dir, err = people.ReadFile(peopleFile); err != nil {
			return err
		}
	}
	directory := people.NewLive(dir)
	m, err := metrics.New(metrics.Config{Addr: metricsAddr, Logger: &log})
	if err != nil {
		return err
	}
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:    []*engine.Flow{claims},
		Embedded: &bus.ServerConfig{DataDir: dataDir, Host: host, Port: nport, Logger: bus.ServerLogger(log)},
		People:   directory, // who the API and the inbox authenticate
		Logger:   &log,
		Observe:  m.Observe,                 // the workers' counters
		Services: []interlock.Background{m}, // started once the workers consume
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, drain(svc, log)) }()

	api, err := httpapi.New(svc, httpapi.Config{Addr: httpAddr, People: directory.Current, Logger: &log})
	if err != nil {
		return err
	}
	in, err := inbox.New(svc, inbox.Config{People: directory.Current, Logger: &log})
	if err != nil {
		return err
	}
	in.Register(api)                             // the inbox's pages, at / on the API's port
	if err := svc.Attach(ctx, api); err != nil { // serves until svc.Stop
		return err
	}

	log.Info().Str("nats", svc.URL()).Str("http", "http://"+api.Addr()).Str("metrics", "http://"+m.Addr()+"/metrics").
		Msg("serving; Ctrl-C drains, a second Ctrl-C stops at once")
	<-ctx.Done()
	return nil
}

// drain stops svc: the HTTP API, the metrics, then the workers, which
// finish the messages in hand, for up to 30 s; a second Ctrl-C or SIGTERM
// ends the wait at once, and what was not finished is delivered again at
// the next start.
func drain(svc *interlock.Service, log zerolog.Logger) error {
	log.Info().Msg("draining; press Ctrl-C again to stop at once")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
