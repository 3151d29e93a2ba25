package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/metrics"
)

// metricName finds the metric names a PromQL expression queries.
var metricName = regexp.MustCompile(`\binterlock_[a-z_]+\b`)

// checkQueries checks that every interlock_ metric expr queries exists
// (a histogram's _bucket, _sum and _count series by its name), and
// returns the names it found.
func checkQueries(t *testing.T, where, expr string, known map[string]bool) []string {
	t.Helper()
	found := metricName.FindAllString(expr, -1)
	if len(found) == 0 {
		t.Errorf("%s: %q queries no interlock metric", where, expr)
	}
	for _, name := range found {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			t.Errorf("%s: %s is not a metric of the service", where, name)
		}
	}
	return found
}

func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	known := m.MetricNames()
	if len(known) < 15 {
		t.Fatalf("the service describes only %v", known)
	}
	return known
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
}

func TestDashboardQueriesTheServicesMetrics(t *testing.T) {
	t.Parallel()
	known := knownMetrics(t)
	b, err := os.ReadFile("../deploy/grafana/interlock.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/interlock.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
		t.Fatalf("dashboard: title %q, uid %q, schemaVersion %d (want Grafana 10's, 36 or later), %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	queried := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: %d targets, grid %+v", p.Title, len(p.Targets), p.GridPos)
		}
		for _, tg := range p.Targets {
			for _, name := range checkQueries(t, "panel "+p.Title, tg.Expr, known) {
				queried[name] = true
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			checkQueries(t, "variable "+v.Name, v.Definition, known)
		}
	}
	for name := range known {
		if !queried[name] && !queried[name+"_bucket"] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}

// rules is the part of a Prometheus rules file the test reads.
type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRulesQueryTheServicesMetrics(t *testing.T) {
	t.Parallel()
	known := knownMetrics(t)
	b, err := os.ReadFile("../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yaml: %v", err)
	}
	var alerts []string
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			alerts = append(alerts, rule.Alert)
			if rule.Alert == "" || rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert name, a severity and a summary", rule)
			}
			checkQueries(t, "alert "+rule.Alert, rule.Expr, known)
		}
	}
	want := []string{"InterlockPendingPastDeadline", "InterlockRefusalsSpiking", "InterlockConsumerLag", "InterlockDeadLetters", "InterlockNoWorkerReady"}
	for _, a := range want {
		if !slices.Contains(alerts, a) {
			t.Errorf("no alert %s among %v", a, alerts)
		}
	}
}

// groupedBy finds the labels of the by clauses of a PromQL expression.
var groupedBy = regexp.MustCompile(`\bby \(([^)]*)\)`)

func TestDashboardShowsApprovalsByFlowAndTool(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/grafana/interlock.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/interlock.json: %v", err)
	}
	hasTool := false
	for _, v := range d.Templating.List {
		hasTool = hasTool || v.Name == "action" && strings.Contains(v.Definition, ", action)")
	}
	if !hasTool {
		t.Error("the dashboard has no variable action listing the tools (label_values(..., action))")
	}
	// Each graph: a query of metric holding also, grouped by flow and
	// action and filtered by the tool variable.
	cases := []struct{ graph, metric, also string }{
		{"interrupt rate", "interlock_interrupts_total", "rate("},
		{"time to decision p50", "interlock_time_to_decision_seconds_bucket", "histogram_quantile(0.5,"},
		{"time to decision p90", "interlock_time_to_decision_seconds_bucket", "histogram_quantile(0.9,"},
		{"approval rate", "interlock_decisions_total", `outcome=~"approved|edited"`},
		{"resume success rate", "interlock_resumes_total", `result=~"accepted|duplicate"`},
		{"votes", "interlock_votes_total", "quorum"},
		{"reminders", "interlock_reminders_total", "rate("},
		{"reassignments", "interlock_assignments_total", "op"},
	}
	for _, c := range cases {
		found := false
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if !strings.Contains(tg.Expr, c.metric) || !strings.Contains(tg.Expr, c.also) || !strings.Contains(tg.Expr, `action=~"$action"`) {
					continue
				}
				by := groupedBy.FindAllStringSubmatch(tg.Expr, -1)
				grouped := len(by) > 0
				for _, m := range by {
					labels := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
					grouped = grouped && slices.Contains(labels, "flow") && slices.Contains(labels, "action")
				}
				found = found || grouped
			}
		}
		if !found {
			t.Errorf("no panel shows the %s by flow and tool: a query of %s with %s, by (flow, action, ...), filtered action=~\"$action\"", c.graph, c.metric, c.also)
		}
	}
}

func TestOperationsDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range knownMetrics(t) {
		if !strings.Contains(string(b), "| `"+name+"` |") {
			t.Errorf("docs/operations.md has no row for %s in its table of metrics", name)
		}
	}
}
