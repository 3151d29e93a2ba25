package soak

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// With Config.Asks (ModeNetwork), one run in four is an ask: an approval
// an agent asks for over NATS, with a callback URL on the clients' host,
// that the supervisor approves or rejects, in turn, on the ask's role
// subject, or that nobody decides: reminded 2 s before its 4 s deadline,
// then expired. Interlock POSTs the outcome to the callback URL, from
// whichever process delivers it, through its outbound policy.
func isAsk(cfg Config, i int) bool { return cfg.Asks && i%4 == 2 }

// What ask run i's supervisor does.
type askOutcome int

const (
	askApproved askOutcome = iota
	askRejected
	askExpired // nobody decides
	numAskOutcomes
)

// askOf is what ask run i's supervisor does.
func askOf(i int) askOutcome { return askOutcome((i / 4) % int(numAskOutcomes)) }

// The deadline of an ask nobody decides, and its reminder before it.
const (
	askTimeout  = "4s"
	askReminder = "2s"
)

// callbackPort is the port of the callbacks' receiver on the clients'
// host.
const callbackPort = "8443"

// driveAsk asks, as run i, and decides the ask once it waits, until it
// ends or has made no progress for cfg.Patience. It reports whether the
// ask ended.
func (a *agents) driveAsk(ctx context.Context, cfg Config, i int) bool {
	run := runID(i)
	req := protocol.AskRequest{
		AskID: run, Agent: "soak-agent", CallbackURL: "https://" + clientHost + ":" + callbackPort + "/callbacks/" + run,
		Interrupt: protocol.AskInterrupt{
			Kind: protocol.KindApproval, Title: fmt.Sprintf("Send invoice %d", i), Action: "send_invoice",
			Args: json.RawMessage(fmt.Sprintf(`{"invoice":"in-%06d"}`, i)), ApproverRole: refund.SupervisorRole,
		},
	}
	if askOf(i) == askExpired {
		req.Interrupt.Timeout, req.Interrupt.Reminders = askTimeout, []string{askReminder}
	}
	start, err := a.newCommand(a.names.AskRequest(), protocol.TypeAskRequest, run, run+"-ask", req)
	if err != nil {
		return false
	}
	var decision *command
	return a.follow(ctx, cfg, protocol.AskFlow, run, start, func(cp protocol.Checkpoint) {
		if askOf(i) == askExpired {
			return // nobody decides
		}
		if decision == nil {
			in, err := a.c.LastInterrupt(ctx, protocol.AskFlow, run)
			if err != nil || in.RequestID != cp.Interrupt.RequestID {
				return // not announced yet: read again
			}
			sup := a.approvers[refund.SupervisorRole]
			r := protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, IdempotencyKey: run + "-decide",
				Decision: string(protocol.VerdictApprove), Approver: sup.name}
			if askOf(i) == askRejected {
				r.Decision, r.Reason = string(protocol.VerdictReject), "soak: not this one"
			}
			if decision, err = a.newCommand(a.names.In(protocol.AskFlow, "resume")+"."+sup.role, protocol.TypeResume, run, run+"-decide", r); err != nil {
				decision = nil
				return
			}
			decision.js, decision.role = sup.js, sup.role
		}
		a.send(ctx, decision, cfg.Retry)
	})
}

// checkAsk checks ask run i's final checkpoint, events and callbacks. It
// returns what is wrong, "" if nothing is.
func (a *agents) checkAsk(i int, c protocol.Checkpoint, t tally) (lost, dup string) {
	if d := t.duplicates(); d != "" {
		return "", d
	}
	sup := a.approvers[refund.SupervisorRole].entitled
	for _, d := range c.Decisions {
		if d.Approver != sup {
			return fmt.Sprintf("ask: decided by %q, who is not entitled to it (decisions %+v)", d.Approver, c.Decisions), ""
		}
	}
	want, status := protocol.VerdictApprove, "answered"
	switch askOf(i) {
	case askRejected:
		want = protocol.VerdictReject
	case askExpired:
		want, status = "", "expired"
	}
	switch {
	case want == "" && (c.Status != protocol.StatusExpired || len(c.Decisions) > 0):
		return fmt.Sprintf("ask: %s at %s with decisions %+v; want expired, undecided", c.Status, c.Node, c.Decisions), ""
	case want != "" && (c.Status != protocol.StatusCompleted || len(c.Decisions) == 0 || c.Decisions[len(c.Decisions)-1].Verdict != want):
		return fmt.Sprintf("ask: %s at %s with decisions %+v; want completed, %s", c.Status, c.Node, c.Decisions, want), ""
	}
	reminded := 0
	if want == "" {
		reminded = 1
		if t.reminded == 0 && t.expired == 1 {
			// The reminder fell due while a fault held its worker up (a
			// read refused while a node was cut off, then backed off),
			// and came after the deadline had been applied: it reminds
			// no one of what no longer waits, and is not sent. Counted
			// apart; twice would be a duplicate.
			a.moot.Store(runID(i), true)
			reminded = 0
		}
	}
	if t.started != 1 || t.answered != 1 || t.reminded != reminded {
		return fmt.Sprintf("%s: ask: %d started, %d answered and %d reminded events; want 1, 1 and %d", eventsMissingPrefix, t.started, t.answered, t.reminded, reminded), ""
	}
	got := a.callbacks.of(runID(i))
	switch {
	case len(got) == 0:
		// Delivered with retries and backoff: it may yet come.
		return eventsMissingPrefix + ": ask: its callback URL has not been called", ""
	case got[0].decision != want || got[0].status != status:
		return fmt.Sprintf("ask: the callback says %s %q, want %s %q", got[0].status, got[0].decision, status, want), ""
	}
	for _, cb := range got[1:] {
		if cb.id != got[0].id {
			return "", fmt.Sprintf("ask: its callback URL was called for two events (webhook-id %q and %q)", got[0].id, cb.id)
		}
	}
	return "", ""
}

// callback is one POST to a callback URL.
type callback struct {
	id       string // its webhook-id
	status   string
	decision protocol.Verdict
}

// callbacks receives the asks' callbacks over HTTPS on the clients' host,
// as an agent's endpoint would.
type callbacks struct {
	srv  *http.Server
	done chan struct{}

	mu    sync.Mutex
	byAsk map[string][]callback
	posts int
}

// startCallbacks serves the callbacks on l with the certificate of
// certFile and keyFile, until close.
func startCallbacks(l net.Listener, certFile, keyFile string) (*callbacks, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("soak: the callbacks' certificate: %w", err)
	}
	cb := &callbacks{byAsk: map[string][]callback{}, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /callbacks/{ask}", cb.receive)
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		defer close(cb.done)
		_ = cb.srv.Serve(tls.NewListener(l, cb.srv.TLSConfig))
	}()
	return cb, nil
}

// receive records a callback.
func (cb *callbacks) receive(w http.ResponseWriter, r *http.Request) {
	var ans protocol.Answered
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&ans); err != nil || ans.AskID != r.PathValue("ask") {
		http.Error(w, "not an answered ask of this URL", http.StatusBadRequest)
		return
	}
	cb.mu.Lock()
	cb.byAsk[ans.AskID] = append(cb.byAsk[ans.AskID], callback{id: r.Header.Get("webhook-id"), status: ans.Status, decision: ans.Decision})
	cb.posts++
	cb.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// of is what ask's callback URL received, in order.
func (cb *callbacks) of(ask string) []callback {
	if cb == nil {
		return nil
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return append([]callback(nil), cb.byAsk[ask]...)
}

// counts are how many POSTs were received, and how many of them repeated
// one received before (a retry, with the same webhook-id).
func (cb *callbacks) counts() (posts, repeats int) {
	if cb == nil {
		return 0, 0
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for _, got := range cb.byAsk {
		repeats += len(got) - 1
	}
	return cb.posts, repeats
}

// close stops the receiver.
func (cb *callbacks) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := cb.srv.Shutdown(ctx)
	<-cb.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// egressAllow is serve's --egress-allow for the callbacks' receiver.
func egressAllow() string { return strings.Join([]string{clientHost, callbackPort}, ":") }
