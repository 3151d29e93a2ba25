package metrics

import (
	"context"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricNames are the names of the interlock_ metrics the service
// describes, whether or not they have series yet.
func (s *Service) MetricNames() map[string]bool {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		s.counts.Describe(ch)
		s.pending.Describe(ch)
		(&natsCollector{s: s}).Describe(ch)
		s.workerFlows.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// PendingKept is how many things the pending gauges hold: label sets,
// flows and deadlines, whatever the number of waiting runs.
func (s *Service) PendingKept() int { return s.pending.kept() }

// CountPending counts the pending index now, as the service does every
// Config.PendingEvery.
func (s *Service) CountPending(ctx context.Context) error {
	return s.pending.recount(ctx, s.cfg.Timeout)
}
