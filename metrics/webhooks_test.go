package metrics_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/interlockhq/interlock/metrics"
)

func TestWebhookAttemptsAreCountedBySubscriptionAndStatus(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveWebhook("crm", "retrying", 2*time.Second)
	m.ObserveWebhook("crm", "delivered", 30*time.Millisecond)
	m.ObserveWebhook("pager", "dead", 10*time.Second)
	m.ObserveWebhook("crm", "retrying", time.Second)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var samples uint64
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case "interlock_webhook_deliveries_total":
				got[label(mt, "subscription")+"/"+label(mt, "status")] = mt.GetCounter().GetValue()
			case "interlock_webhook_attempt_seconds":
				samples += mt.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{"crm/retrying": 2, "crm/delivered": 1, "pager/dead": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("interlock_webhook_deliveries_total{%s} = %v, want %v", k, got[k], v)
		}
	}
	if samples != 4 {
		t.Errorf("interlock_webhook_attempt_seconds counted %d attempts, want 4", samples)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
