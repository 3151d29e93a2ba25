// Package metrics serves Interlock's Prometheus metrics, liveness and
// readiness: a [Service] beside the workers, with the service's lifecycle.
//
// Its numbers come from three places:
//
//   - the workers: [Service.Observe] hears what became of every inbound
//     message (interrupts asked, decisions, votes, reminders, claims and
//     delegations, refusals, dead letters, expiries, escalations, how long
//     handling took) and counts it in this process, by flow and by the
//     approval's action (the tool, for the tool-call gate);
//   - the pending index (the <prefix>_pending bucket): the service counts
//     it on the server at start and every Config.PendingEvery, keeping
//     only the sums, so the pending interrupts by flow, kind and approver
//     role, and the age of the oldest, are right from the first scrape
//     after a restart and the same on every worker, and the service's
//     memory does not grow with the runs that wait;
//   - JetStream, when scraped: the workers' consumer's backlog, the
//     inbound stream's size, and whether everything the workers need is
//     there (also on /readyz).
//
// Wiring it into a service:
//
//	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:9090"})
//	...
//	svc, err := interlock.Start(ctx, interlock.Config{
//		Flows:    flows,
//		Observe:  m.Observe,
//		Services: []interlock.Background{m},
//	})
//
// The interlock service hands the metrics service its JetStream context
// ([Service.UseJetStream]) before starting it. Every metric has a bounded
// set of label values: no run ids and no approver names; flows are those
// known to run here, and actions are capped. docs/operations.md lists the
// metrics and deploy/ holds a Grafana dashboard and Prometheus alerts.
package metrics
