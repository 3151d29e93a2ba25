package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

// The Kubernetes side of deploy/: the Helm chart deploy/helm/interlock
// and the plain manifests deploy/k8s/. The test renders the chart's
// templates with text/template and the few template functions the chart
// uses (a function it starts to use and this file does not know fails the
// test: add it here), strictly (a value the templates read must be in
// values.yaml), and, where the helm binary is installed (.ci/run installs
// it), with `helm template` too: both renderings must agree object for
// object, and an error in one must be an error in the other. It then runs
// `interlock serve` with the workers' container arguments.

const chartDir = "../../deploy/helm/interlock"

// object is one Kubernetes object, as YAML decodes it.
type object = map[string]any

// get walks obj by keys (strings for maps, ints for lists), nil when a
// step is missing.
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, keys ...any) string {
	switch v := get(v, keys...).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func list(v any, keys ...any) []any {
	l, _ := get(v, keys...).([]any)
	return l
}

// helmFuncs are the template functions of Helm (from sprig) the chart
// uses, with Helm's argument order.
func helmFuncs(tpl **template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := (*tpl).ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) },
		"default": func(def, v any) any {
			if v == nil || v == "" || v == false || v == 0 {
				return def
			}
			return v
		},
		// As Helm's: only nil and "" are missing (an empty list is not).
		"required": func(msg string, v any) (any, error) {
			if v == nil || v == "" {
				return nil, fmt.Errorf("%s", msg)
			}
			return v, nil
		},
		"fail": func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) },
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
	}
}

// readYAML decodes a YAML file into a map.
func readYAML(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// merge sets over's leaves into base, recursively, as helm --set does.
func merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// decodeObjects decodes a YAML stream of Kubernetes objects; every one
// must have apiVersion, kind and metadata.name.
func decodeObjects(t *testing.T, where, text string) []object {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var objs []object
	for {
		var o object
		err := dec.Decode(&o)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", where, err, text)
		}
		if o == nil {
			continue
		}
		if str(o, "apiVersion") == "" || str(o, "kind") == "" || str(o, "metadata", "name") == "" {
			t.Errorf("%s: an object without apiVersion, kind or metadata.name: %v", where, o)
		}
		objs = append(objs, o)
	}
	return objs
}

// renderChart renders the chart with values.yaml and over, as
// `helm template interlock deploy/helm/interlock` would.
func renderChart(t *testing.T, over map[string]any) ([]object, error) {
	t.Helper()
	values := merge(readYAML(t, filepath.Join(chartDir, "values.yaml")), over)
	chart := map[string]any{}
	for k, v := range readYAML(t, filepath.Join(chartDir, "Chart.yaml")) {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	data := map[string]any{
		"Values":  values,
		"Chart":   chart,
		"Release": map[string]any{"Name": "interlock", "Namespace": "default", "Service": "Helm"},
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl *template.Template
	tpl = template.New("chart").Funcs(helmFuncs(&tpl)).Option("missingkey=error")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpl.New(filepath.Base(f)).Parse(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var out strings.Builder
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		var b strings.Builder
		if err := tpl.ExecuteTemplate(&b, name, data); err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, b.String())
	}
	objs := decodeObjects(t, "the chart", out.String())
	if helm := helmBinary(t); helm != "" {
		real, err := helmTemplate(t, helm, over)
		if err != nil {
			t.Fatalf("helm template with %v: %v; the test's own rendering succeeded", over, err)
		}
		if !reflect.DeepEqual(sortObjects(real), sortObjects(objs)) {
			t.Fatalf("helm template with %v renders other objects than the test's rendering:\nhelm: %v\ntest: %v", over, real, objs)
		}
	}
	return objs, nil
}

// helmBinary is the path of the helm command, or "" without one (a
// failure when CI=true: .ci/run installs it).
func helmBinary(t *testing.T) string {
	t.Helper()
	helm, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm is not installed (.ci/run installs it): %v", err)
		}
		return ""
	}
	return helm
}

// helmTemplate renders the chart with `helm template`, with over as a
// values file.
func helmTemplate(t *testing.T, helm string, over map[string]any) ([]object, error) {
	t.Helper()
	b, err := yaml.Marshal(over)
	if err != nil {
		t.Fatal(err)
	}
	// Not in t.TempDir(): helm splits -f on commas, which subtests' names
	// (and so their temporary directories) may hold.
	f, err := os.CreateTemp("", "interlock-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := f.Name()
	t.Cleanup(func() { _ = os.Remove(file) })
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(t.Context(), helm, "template", "interlock", chartDir, "--namespace", "default", "-f", file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return decodeObjects(t, "helm template", stdout.String()), nil
}

// sortObjects orders objects by kind and name.
func sortObjects(objs []object) []object {
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b object) int {
		return strings.Compare(str(a, "kind")+"/"+str(a, "metadata", "name"), str(b, "kind")+"/"+str(b, "metadata", "name"))
	})
	return objs
}

func mustRender(t *testing.T, over map[string]any) []object {
	t.Helper()
	objs, err := renderChart(t, over)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", over, err)
	}
	return objs
}

func byKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if str(o, "kind") == kind {
			out = append(out, o)
		}
	}
	return out
}

// workerArgs are the flags of the worker container's `serve`, by name.
type workerArgs struct {
	list  []string
	flags map[string]string
}

func argsOf(t *testing.T, container any) workerArgs {
	t.Helper()
	var a workerArgs
	a.flags = map[string]string{}
	for _, v := range list(container, "args") {
		a.list = append(a.list, fmt.Sprint(v))
	}
	if len(a.list) == 0 || a.list[0] != "serve" {
		t.Fatalf("the worker's args %v do not start with serve", a.list)
	}
	for _, arg := range a.list[1:] {
		name, value, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		a.flags[name] = value
	}
	return a
}

// checkWorkers checks a Deployment of workers against what serve serves
// with its args: the probes ask the metrics listener's paths on its port,
// which listens beyond loopback; every file flag names a mounted file;
// every port a Service or NetworkPolicy names is the container's.
func checkWorkers(t *testing.T, where string, objs []object) (object, workerArgs) {
	t.Helper()
	deps := byKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%s: %d Deployments, want the workers'", where, len(deps))
	}
	dep := deps[0]
	pod := get(dep, "spec", "template", "spec")
	c := get(pod, "containers", 0)
	args := argsOf(t, c)
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		n, _ := get(p, "containerPort").(int)
		ports[str(p, "name")] = n
	}
	_, mport, err := net.SplitHostPort(args.flags["metrics"])
	if err != nil || !strings.HasPrefix(args.flags["metrics"], "0.0.0.0:") {
		t.Errorf("%s: --metrics %q: the kubelet reaches the pod's IP, not its loopback; listen on 0.0.0.0", where, args.flags["metrics"])
	}
	if _, ok := args.flags["metrics-insecure-public"]; !ok {
		t.Errorf("%s: --metrics beyond loopback without --metrics-insecure-public: serve refuses to start", where)
	}
	if strconv.Itoa(ports["metrics"]) != mport {
		t.Errorf("%s: container port metrics %d, but --metrics listens on %s", where, ports["metrics"], mport)
	}
	for probe, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
		p := get(c, probe, "httpGet")
		if p == nil {
			t.Errorf("%s: no %s", where, probe)
			continue
		}
		if str(p, "path") != want || str(p, "port") != "metrics" {
			t.Errorf("%s: %s asks %s on port %s, want %s on port metrics", where, probe, str(p, "path"), str(p, "port"), want)
		}
	}
	if h, ok := args.flags["http"]; ok && h != "" {
		_, hport, _ := net.SplitHostPort(h)
		if strconv.Itoa(ports["http"]) != hport || !strings.HasPrefix(h, "0.0.0.0:") {
			t.Errorf("%s: --http %s, container port http %d", where, h, ports["http"])
		}
		if args.flags["people"] == "" {
			t.Errorf("%s: --http beyond loopback without --people: serve refuses to start", where)
		}
	}
	// Security: non-root, read-only root, no escalation.
	if get(pod, "securityContext", "runAsNonRoot") != true || get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("%s: the workers must run as non-root on a read-only root without privilege escalation", where)
	}
	// Stopping: the grace period covers the pre-stop pause and the drain.
	grace, _ := get(pod, "terminationGracePeriodSeconds").(int)
	sleep, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
	if time.Duration(grace-sleep)*time.Second <= drainTimeout {
		t.Errorf("%s: terminationGracePeriodSeconds %d leaves no %v for the drain after a %d s pause", where, grace, drainTimeout, sleep)
	}
	// Every file flag names a file of a mounted volume.
	volumes := map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	mounts := map[string]any{}
	for _, m := range list(c, "volumeMounts") {
		if volumes[str(m, "name")] == nil {
			t.Errorf("%s: volume mount %s has no volume", where, str(m, "name"))
		}
		mounts[str(m, "mountPath")] = volumes[str(m, "name")]
	}
	for _, f := range []string{"secret-file", "people", "tls-ca", "creds", "gate-rules", "slack-config"} {
		file, ok := args.flags[f]
		if !ok {
			continue
		}
		v := mounts[path.Dir(file)]
		if v == nil {
			t.Errorf("%s: --%s %s is in no mounted volume", where, f, file)
			continue
		}
		items := list(v, "secret", "items")
		if items == nil {
			items = list(v, "configMap", "items")
		}
		if items != nil && !slices.ContainsFunc(items, func(i any) bool { return str(i, "path") == path.Base(file) }) {
			t.Errorf("%s: --%s %s: volume %s does not hold it", where, f, file, str(v, "name"))
		}
	}
	if _, ok := args.flags["secret-file"]; !ok {
		t.Errorf("%s: no --secret-file: the workers would share a generated secret only through NATS", where)
	}
	labels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	matches := func(sel any) bool {
		m, _ := sel.(map[string]any)
		for k, v := range m {
			if labels[k] != v {
				return false
			}
		}
		return len(m) > 0
	}
	if !matches(get(dep, "spec", "selector", "matchLabels")) {
		t.Errorf("%s: the Deployment's selector does not match its pods", where)
	}
	for _, s := range byKind(objs, "Service") {
		if !matches(get(s, "spec", "selector")) {
			t.Errorf("%s: Service %s selects no worker", where, str(s, "metadata", "name"))
		}
		for _, p := range list(s, "spec", "ports") {
			if _, ok := ports[str(p, "targetPort")]; !ok {
				t.Errorf("%s: Service %s targets port %s, which the workers do not have", where, str(s, "metadata", "name"), str(p, "targetPort"))
			}
		}
	}
	for _, kind := range []string{"PodDisruptionBudget", "NetworkPolicy"} {
		for _, o := range byKind(objs, kind) {
			sel := get(o, "spec", "selector", "matchLabels")
			if kind == "NetworkPolicy" {
				sel = get(o, "spec", "podSelector", "matchLabels")
				for _, rule := range list(o, "spec", "ingress") {
					for _, p := range list(rule, "ports") {
						if _, ok := ports[str(p, "port")]; !ok {
							t.Errorf("%s: NetworkPolicy lets in port %s, which the workers do not have", where, str(p, "port"))
						}
					}
				}
			}
			if !matches(sel) {
				t.Errorf("%s: %s selects no worker", where, kind)
			}
		}
	}
	return dep, args
}

// secretRefs are the Secrets a Deployment reads.
func secretRefs(dep object) []string {
	var names []string
	pod := get(dep, "spec", "template", "spec")
	for _, v := range list(pod, "volumes") {
		if n := str(v, "secret", "secretName"); n != "" {
			names = append(names, n)
		}
	}
	for _, c := range list(pod, "containers") {
		for _, e := range list(c, "env") {
			if n := str(e, "valueFrom", "secretKeyRef", "name"); n != "" {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestHelmChartRenders(t *testing.T) {
	t.Parallel()
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		over      map[string]any
		wantKinds []string
		wantArgs  []string
		noArgs    []string
		wantEnv   []string // from a Secret
		wantPorts []string // in the container, the Service and the NetworkPolicy
	}{
		{name: "defaults", wantKinds: []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service"},
			wantArgs: []string{"--nats-url=tls://nats:4222", "--replicas=3", "--http=0.0.0.0:8080", "--tls-ca=/etc/interlock/nats-tls/ca.crt"}},
		{name: "no HTTP API, no policy, no budget", over: map[string]any{
			"http": map[string]any{"enabled": false}, "networkPolicy": map[string]any{"enabled": false}, "podDisruptionBudget": map[string]any{"enabled": false},
		}, wantKinds: []string{"Deployment", "Service"}, wantArgs: []string{"--http="}, noArgs: []string{"--people"}},
		{name: "creds, gate rules, no CA", over: map[string]any{
			"nats":      map[string]any{"credsSecret": map[string]any{"name": "creds"}, "passwordSecret": map[string]any{"name": ""}, "tlsCASecret": map[string]any{"name": ""}},
			"gateRules": map[string]any{"configMap": "interlock-gate"}, "concurrency": 8, "extraArgs": []any{"--keep-finished=720h"},
		}, wantKinds: []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service"},
			wantArgs: []string{"--creds=/etc/interlock/nats-creds/nats.creds", "--gate-rules=/etc/interlock/gate/rules.yaml", "--concurrency=8", "--keep-finished=720h"},
			noArgs:   []string{"--tls-ca"}},
		{name: "slack bridge", over: map[string]any{"slack": map[string]any{"configMap": "interlock-slack"}},
			wantKinds: []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service"},
			wantArgs:  []string{"--slack-config=/etc/interlock/slack/slack.yaml"}, wantEnv: []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"},
			wantPorts: []string{"slack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := mustRender(t, tc.over)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, str(o, "kind"))
				if k := str(o, "kind"); k == "Secret" || k == "ConfigMap" {
					t.Errorf("the chart makes a %s %s: secrets come from existing Secrets", k, str(o, "metadata", "name"))
				}
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.wantKinds) {
				t.Errorf("kinds %v, want %v", kinds, tc.wantKinds)
			}
			dep, args := checkWorkers(t, "the chart", objs)
			for _, a := range tc.wantArgs {
				if !slices.Contains(args.list, a) {
					t.Errorf("args %v lack %s", args.list, a)
				}
			}
			for _, a := range tc.noArgs {
				if slices.ContainsFunc(args.list, func(s string) bool { return strings.HasPrefix(s, a) }) {
					t.Errorf("args %v have %s", args.list, a)
				}
			}
			c := get(dep, "spec", "template", "spec", "containers", 0)
			for _, name := range tc.wantEnv {
				if !slices.ContainsFunc(list(c, "env"), func(e any) bool {
					return str(e, "name") == name && str(e, "valueFrom", "secretKeyRef", "name") != ""
				}) {
					t.Errorf("no %s from a Secret in the workers' environment", name)
				}
			}
			for _, port := range tc.wantPorts {
				has := func(o any, keys ...any) bool {
					return slices.ContainsFunc(list(o, keys...), func(p any) bool {
						return str(p, "name") == port || str(p, "port") == port
					})
				}
				if !has(c, "ports") || !has(byKind(objs, "Service")[0], "spec", "ports") ||
					!slices.ContainsFunc(list(byKind(objs, "NetworkPolicy")[0], "spec", "ingress"), func(r any) bool { return has(r, "ports") }) {
					t.Errorf("port %s is not in the container, the Service and the NetworkPolicy alike", port)
				}
			}
			// The chart makes no Secret: values.yaml says how to make each.
			for _, name := range secretRefs(dep) {
				if name == "creds" {
					continue
				}
				if !strings.Contains(string(values), "kubectl create secret generic "+name+" ") {
					t.Errorf("Secret %s: values.yaml does not say how to make it", name)
				}
			}
		})
	}
	// A missing required value is an error that names it.
	for value, over := range map[string]map[string]any{
		"secret.existingSecret":     {"secret": map[string]any{"existingSecret": ""}},
		"http.peopleSecret.name":    {"http": map[string]any{"peopleSecret": map[string]any{"name": ""}}},
		"networkPolicy.metricsFrom": {"networkPolicy": map[string]any{"metricsFrom": []any{}}},
		"nats.url":                  {"nats": map[string]any{"url": ""}},
	} {
		if _, err := renderChart(t, over); err == nil || !strings.Contains(err.Error(), value) {
			t.Errorf("rendering without %s: %v, want an error naming it", value, err)
		}
		if helm := helmBinary(t); helm != "" {
			if _, err := helmTemplate(t, helm, over); err == nil || !strings.Contains(err.Error(), value) {
				t.Errorf("helm template without %s: %v, want an error naming it", value, err)
			}
		}
	}
}

// TestHelmLintsTheChart runs `helm lint --strict` on the chart, where helm
// is installed (always in CI).
func TestHelmLintsTheChart(t *testing.T) {
	t.Parallel()
	helm := helmBinary(t)
	if helm == "" {
		t.Skip("helm is not installed; .ci/run installs it")
	}
	out, err := exec.CommandContext(t.Context(), helm, "lint", "--strict", chartDir).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestK8sManifestsAreInStepWithTheChart checks deploy/k8s/interlock.yaml
// as the chart, and that it runs the workers the chart's defaults run.
func TestK8sManifestsAreInStepWithTheChart(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/k8s/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeObjects(t, "deploy/k8s/interlock.yaml", string(b))
	dep, args := checkWorkers(t, "deploy/k8s/interlock.yaml", objs)
	secrets := map[string]bool{}
	for _, s := range byKind(objs, "Secret") {
		secrets[str(s, "metadata", "name")] = true
	}
	for _, name := range secretRefs(dep) {
		if !secrets[name] && !strings.Contains(string(b), "kubectl create secret generic "+name+" ") && !strings.Contains(string(b), "kubectl create secret tls "+name+" ") {
			t.Errorf("Secret %s: neither in the file nor said how to make", name)
		}
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget", "NetworkPolicy"} {
		if len(byKind(objs, kind)) != 1 {
			t.Errorf("no %s for the workers", kind)
		}
	}
	_, chartArgs := checkWorkers(t, "the chart", mustRender(t, nil))
	if !slices.Equal(slices.Sorted(maps.Keys(args.flags)), slices.Sorted(maps.Keys(chartArgs.flags))) {
		t.Errorf("serve's flags differ:\n  k8s:   %v\n  chart: %v", args.list, chartArgs.list)
	}
}

// TestDeployedWorkersServe runs `interlock serve` with the arguments of
// the chart's and the plain manifests' workers, against a NATS server
// configured as deploy/nats-server.conf, with their files where the
// volumes would put them: serve starts, the probes' paths answer on the
// metrics listener, the HTTP API authenticates a caller of the auth file,
// and serve stops cleanly. Addresses move to loopback, and --replicas to
// 1 (one server here).
func TestDeployedWorkersServe(t *testing.T) {
	tlsFiles := natstest.TLS(t)
	password := "5e0d1c2b3a49f8e7d6c5b4a3928170f6"
	t.Setenv("INTERLOCK_TLS_CERT", tlsFiles.Cert)
	t.Setenv("INTERLOCK_TLS_KEY", tlsFiles.Key)
	t.Setenv("INTERLOCK_TLS_CA", tlsFiles.CA)
	for _, u := range []string{"WORKERS", "AGENT", "BOT", "OPERATOR", "ADMIN"} {
		t.Setenv("INTERLOCK_"+u+"_PASSWORD", password+strings.ToLower(u))
	}
	opts, err := server.ProcessConfigFile("../../deploy/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.StoreDir, opts.NoSigs, opts.SyncAlways = "127.0.0.1", -1, t.TempDir(), true, false
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server is not ready")
	}
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)

	b, err := os.ReadFile("../../deploy/k8s/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k8s, _ := checkWorkers(t, "deploy/k8s/interlock.yaml", decodeObjects(t, "deploy/k8s/interlock.yaml", string(b)))
	chart, _ := checkWorkers(t, "the chart", mustRender(t, map[string]any{"gateRules": map[string]any{"configMap": "interlock-gate"}}))
	for name, dep := range map[string]object{"k8s": k8s, "chart": chart} {
		t.Run(name, func(t *testing.T) {
			runWorkers(t, dep, url, tlsFiles.CA, password+"workers")
		})
	}
}

func runWorkers(t *testing.T, dep object, natsURL, ca, password string) {
	c := get(dep, "spec", "template", "spec", "containers", 0)
	args := argsOf(t, c)
	dir := t.TempDir()
	token := ""
	var run []string
	for _, arg := range args.list {
		name, value, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		file := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(value, "/"), "/", "_"))
		switch name {
		case "nats-url":
			value = natsURL
		case "replicas":
			value = "1"
		case "http", "metrics":
			if value != "" {
				value = "127.0.0.1:0"
			}
		case "secret-file":
			if err := os.WriteFile(file, []byte("9f3c2a7be1d04f86a5c3e2b17d9084f6c1e2a3b4d5f60718293a4b5c6d7e8f90\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			value = file
		case "people":
			tok, err := people.AddPerson(file, people.Person{Name: "lena", Roles: []string{"legal"}}, true)
			if err != nil {
				t.Fatal(err)
			}
			token, value = tok, file
		case "tls-ca":
			value = ca
		case "gate-rules":
			b, err := os.ReadFile("../../examples/gate/rules.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			value = file
		case "serve", "metrics-insecure-public", "nats-user", "log-format", "concurrency":
			run = append(run, arg)
			continue
		default:
			t.Fatalf("serve flag %s: the test does not know how to run it here", arg)
		}
		run = append(run, "--"+name+"="+value)
	}
	for _, e := range list(c, "env") {
		switch n := str(e, "name"); n {
		case "INTERLOCK_WORKERS_PASSWORD":
			t.Setenv(n, password)
		case "INTERLOCK_INSTANCE", "GOMEMLIMIT":
		default:
			t.Errorf("env %s: the test does not know it", n)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append(run, "--log-level=info"), outW, errW)
		_ = outW.Close()
		_ = errW.Close()
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve %v returned %v at stop, want a clean stop", run, err)
			}
		case <-time.After(40 * time.Second):
			t.Error("serve did not stop within 40 s")
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	lines := bufio.NewScanner(outR)
	var metricsURL, apiAddr string
	for metricsURL == "" && lines.Scan() {
		l := lines.Text()
		if rest, ok := strings.CutPrefix(l, "HTTP API on http://"); ok {
			apiAddr, _, _ = strings.Cut(rest, " ")
		}
		if rest, ok := strings.CutPrefix(l, "Metrics on "); ok {
			metricsURL, _, _ = strings.Cut(rest, " ")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if metricsURL == "" {
		t.Fatalf("serve %v stopped before serving metrics", run)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	pod := get(dep, "spec", "template", "spec")
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		p := str(get(pod, "containers", 0), probe, "httpGet", "path")
		natstest.Eventually(t, probe+" "+p+" answers 200", func() bool {
			resp, err := hc.Get(strings.TrimSuffix(metricsURL, "/metrics") + p)
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	if _, ok := args.flags["people"]; ok {
		if apiAddr == "" {
			t.Fatal("serve printed no HTTP API address")
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+apiAddr+"/v1/interrupts", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /v1/interrupts without a token: %d, want 401", resp.StatusCode)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err = hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Errorf("GET /v1/interrupts as lena: %d %v", resp.StatusCode, err)
		}
	}
}
