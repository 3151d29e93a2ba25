package bus_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// deployUsers are the users every deploy configuration has.
var deployUsers = []string{"admin", "agent", "bot", "operator", "workers"}

// deployEnv sets the environment the deploy configurations read, and
// returns the users' passwords. The test cannot run in parallel.
func deployEnv(t *testing.T) (natstest.TLSFiles, map[string]string) {
	t.Helper()
	f := natstest.TLS(t)
	t.Setenv("INTERLOCK_TLS_CERT", f.Cert)
	t.Setenv("INTERLOCK_TLS_KEY", f.Key)
	t.Setenv("INTERLOCK_TLS_CA", f.CA)
	t.Setenv("POD_NAME", "nats-0")    // deploy/k8s
	t.Setenv("SERVER_NAME", "nats-0") // the nats chart
	pw := map[string]string{}
	for i, u := range deployUsers {
		// Hex, as `openssl rand -hex 24` makes; one starts with digits.
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		p := strings.Repeat("7", i%2) + "a" + strings.ToLower(strings.TrimLeft(big.NewInt(0).SetBytes(b).Text(16), "0"))
		pw[u] = p
		t.Setenv("INTERLOCK_"+strings.ToUpper(u)+"_PASSWORD", p)
	}
	return f, pw
}

// k8sNATSConfig writes the files of the ConfigMap interlock-nats of
// deploy/k8s/interlock.yaml into a directory and returns its nats.conf.
func k8sNATSConfig(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../deploy/k8s/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	files := map[string]*strings.Builder{}
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutSuffix(strings.TrimSpace(line), ": |"); ok && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			cur = &strings.Builder{}
			files[name] = cur
			continue
		}
		if cur != nil && (strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "") {
			cur.WriteString(strings.TrimPrefix(line, "    ") + "\n")
			continue
		}
		cur = nil
	}
	for _, name := range []string{"nats.conf", "interlock-auth.conf"} {
		if files[name] == nil {
			t.Fatalf("deploy/k8s/interlock.yaml has no %s in a ConfigMap", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimRight(files[name].String(), "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("../deploy/interlock-auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(files["interlock-auth.conf"].String(), "\n") + "\n"; got != string(want) {
		t.Error("the ConfigMap's interlock-auth.conf differs from deploy/interlock-auth.conf; copy it over")
	}
	return filepath.Join(dir, "nats.conf")
}

// natsChartConfig writes the nats.conf the official NATS Helm chart
// (nats-io/k8s, chart nats 1.x) makes from deploy/helm/nats-values.yaml,
// with the files of its ConfigMap beside it, and returns its path. The
// chart's own parts (files/config/*.yaml: server name, ports, TLS files,
// routes, JetStream store) are written here as the chart writes them; the
// values' merge blocks are merged in, and the result formatted as the
// chart's nats.formatConfig does: JSON, "<< x >>" unquoted, a key ending
// in $include made an include directive. Checked against the nats.conf of
// `helm template` with chart nats 2.14.2 and these values.
func natsChartConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/helm/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool
				Replicas int
				TLS      struct {
					Enabled    bool
					SecretName string `yaml:"secretName"`
					Merge      map[string]any
				} `yaml:"tls"`
			}
			JetStream struct {
				Enabled   bool
				FileStore struct {
					Enabled bool
					Dir     string
					PVC     struct {
						Enabled bool
						Size    string
					} `yaml:"pvc"`
				} `yaml:"fileStore"`
				MemoryStore struct{ Enabled bool } `yaml:"memoryStore"`
				Merge       map[string]any
			} `yaml:"jetstream"`
			NATS struct {
				Port int
				TLS  struct {
					Enabled    bool
					SecretName string `yaml:"secretName"`
					Merge      map[string]any
				} `yaml:"tls"`
			} `yaml:"nats"`
			Merge map[string]any
		}
		TLSCA struct {
			Enabled    bool
			SecretName string `yaml:"secretName"`
			Key        string
		} `yaml:"tlsCA"`
		ConfigMap struct {
			Merge struct{ Data map[string]string }
		} `yaml:"configMap"`
		Container struct {
			Env map[string]struct {
				ValueFrom struct {
					SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
				} `yaml:"valueFrom"`
			}
		}
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("deploy/helm/nats-values.yaml: %v", err)
	}
	c := v.Config
	switch {
	case !c.Cluster.Enabled || c.Cluster.Replicas != 3:
		t.Errorf("nats-values.yaml: cluster enabled %v with %d replicas, want a 3-node cluster", c.Cluster.Enabled, c.Cluster.Replicas)
	case !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.MemoryStore.Enabled:
		t.Errorf("nats-values.yaml: want JetStream with file storage on a volume, and no memory store: %+v", c.JetStream)
	case !c.NATS.TLS.Enabled || !c.Cluster.TLS.Enabled || !v.TLSCA.Enabled:
		t.Errorf("nats-values.yaml: want TLS for clients and routes, with a CA")
	}
	for _, u := range deployUsers {
		name := "INTERLOCK_" + strings.ToUpper(u) + "_PASSWORD"
		if ref := v.Container.Env[name].ValueFrom.SecretKeyRef; ref.Name == "" || ref.Key != name {
			t.Errorf("nats-values.yaml: %s is not read from a Secret", name)
		}
	}
	dir := t.TempDir()
	for name, text := range v.ConfigMap.Merge.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("../deploy/interlock-auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if v.ConfigMap.Merge.Data["interlock-auth.conf"] != string(want) {
		t.Error("nats-values.yaml's interlock-auth.conf differs from deploy/interlock-auth.conf; copy it over")
	}
	// The chart mounts the TLS secret at /etc/nats-certs/{nats,cluster}
	// and the CA at /etc/nats-ca-cert; here, the test's files.
	tlsBlock := func(merge map[string]any) map[string]any {
		m := map[string]any{"cert_file": os.Getenv("INTERLOCK_TLS_CERT"), "key_file": os.Getenv("INTERLOCK_TLS_KEY"), "ca_file": os.Getenv("INTERLOCK_TLS_CA")}
		maps.Copy(m, merge)
		return m
	}
	js := map[string]any{"max_memory_store": 0, "store_dir": c.JetStream.FileStore.Dir, "max_file_store": "<< " + c.JetStream.FileStore.PVC.Size + " >>"}
	maps.Copy(js, c.JetStream.Merge)
	var routes []any
	for i := range c.Cluster.Replicas {
		routes = append(routes, fmt.Sprintf("tls://nats-%d.nats-headless:6222", i))
	}
	conf := map[string]any{
		"server_name": "<< $SERVER_NAME >>", "lame_duck_grace_period": "10s", "lame_duck_duration": "30s",
		"pid_file": filepath.Join(dir, "nats.pid"),
		"port":     c.NATS.Port, "tls": tlsBlock(c.NATS.TLS.Merge), "http_port": 8222, "jetstream": js,
		"cluster": map[string]any{"name": "nats", "port": 6222, "no_advertise": true, "routes": routes, "tls": tlsBlock(c.Cluster.TLS.Merge)},
	}
	maps.Copy(conf, c.Merge)
	// Helm's toPrettyRawJson: indented, without HTML escapes.
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(conf); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`".*\$include": "(.*)",?`).ReplaceAllString(out.String(), "include ${1};")
	text = regexp.MustCompile(`"<<\s+(.*?)\s+>>"`).ReplaceAllString(text, "${1}")
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDeployConfigsLoad loads every NATS configuration of deploy/ into the
// nats-server library, so none can rot, and checks they agree on one set
// of users and rights, with TLS where they listen.
func TestDeployConfigsLoad(t *testing.T) {
	deployEnv(t)
	paths := []string{"../deploy/nats-server.conf", "../deploy/cluster/nats-1.conf", "../deploy/cluster/nats-2.conf", "../deploy/cluster/nats-3.conf", k8sNATSConfig(t), natsChartConfig(t)}
	var want map[string]*server.Permissions
	for _, path := range paths {
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		perms := map[string]*server.Permissions{}
		var names []string
		for _, u := range opts.Users {
			perms[u.Username] = u.Permissions
			names = append(names, u.Username)
			if u.Password == "" || strings.HasPrefix(u.Password, "$") {
				t.Errorf("%s: user %s has no password from the environment", path, u.Username)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, deployUsers) {
			t.Errorf("%s: users %v, want %v", path, names, deployUsers)
		}
		if want == nil {
			want = perms
		} else if !reflect.DeepEqual(perms, want) {
			t.Errorf("%s: the users' permissions differ from %s's", path, paths[0])
		}
		if opts.TLSConfig == nil {
			t.Errorf("%s: clients connect without TLS", path)
		}
		if opts.Cluster.Port != 0 && (opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert) {
			t.Errorf("%s: the nodes do not verify each other's certificates", path)
		}
		if !opts.SyncAlways {
			t.Errorf("%s: JetStream does not sync before acknowledging", path)
		}
		opts.StoreDir, opts.Port, opts.HTTPPort, opts.NoSigs = t.TempDir(), -1, 0, true
		if opts.Cluster.Port != 0 {
			opts.Cluster.Port = -1
		}
		if _, err := server.NewServer(opts); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	b, err := os.ReadFile("../deploy/k8s/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "\n  secret: ")
	placeholder, _, _ := strings.Cut(rest, "\n")
	if _, err := bus.ParseSecret(strings.Trim(placeholder, `"`)); err == nil {
		t.Errorf("the placeholder secret %s of deploy/k8s/interlock.yaml is accepted", placeholder)
	}
}

// TestDeployUsersHaveOnlyTheirRights runs Interlock's embedded server with
// deploy/nats-server.conf and checks, as each client user, that it can do
// its job and nothing that would break Interlock.
func TestDeployUsersHaveOnlyTheirRights(t *testing.T) {
	tlsFiles, pw := deployEnv(t)
	n, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	// No secret: the generated one, kept in the keys bucket.
	svc, err := interlock.Start(t.Context(), interlock.Config{
		Flows: []*engine.Flow{booking.Flow()}, Instance: "test", Concurrency: 4,
		Embedded: &bus.ServerConfig{
			ConfigFile: "../deploy/nats-server.conf", DataDir: t.TempDir(), Host: "127.0.0.1", Port: -1, LazyFsync: true,
			WorkersPassword: os.Getenv("INTERLOCK_WORKERS_PASSWORD"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.WithoutCancel(t.Context())) })
	url := svc.URL()
	as := func(name string) (*user, *client.Client) {
		u := connectUser(t, name, url, nats.UserInfo(name, pw[name]), nats.RootCAs(tlsFiles.CA))
		return u, client.New(u.nc, u.js, n, "/test/"+name, natstest.Wait)
	}
	if nc, err := nats.Connect(url, nats.RootCAs(tlsFiles.CA)); err == nil {
		nc.Close()
		t.Error("a client without credentials connected")
	}
	if nc, err := nats.Connect(strings.Replace(url, "tls://", "nats://", 1), nats.UserInfo("agent", pw["agent"])); err == nil {
		nc.Close()
		t.Error("a client connected without TLS")
	}

	agent, ac := as("agent")
	startBooking(t, ac, "r-1")
	in := lastInterrupt(t, ac, "r-1")
	if _, err := ac.Checkpoint(t.Context(), "booking", "r-1"); err != nil {
		t.Errorf("agent: checkpoint: %v", err)
	}
	agent.denied(t, "list pending runs", "$JS.API.DIRECT.GET.KV_"+n.PendingBucket(), func(ctx context.Context) error {
		_, err := ac.ListPending(ctx, client.PendingQuery{})
		return err
	})

	bot, bc := as("bot")
	if p, err := bc.ListPending(t.Context(), client.PendingQuery{}); err != nil || len(p.Items) != 1 {
		t.Errorf("bot: pending: %v %v", p, err)
	}
	bot.denied(t, "create a consumer", "$JS.API.CONSUMER.CREATE.KV_"+n.PendingBucket(), func(ctx context.Context) error {
		_, err := bot.js.OrderedConsumer(ctx, "KV_"+n.PendingBucket(), jetstream.OrderedConsumerConfig{})
		return err
	})
	if in2 := lastInterrupt(t, bc, "r-1"); in2.ResumeToken != in.ResumeToken {
		t.Fatal("bot: the last interrupt differs from the agent's")
	}
	ev, err := bc.Resume(t.Context(), "booking", "r-1", protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, Answers: map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)}})
	if err != nil || ev.Kind != "interrupted" {
		t.Fatalf("bot: resume: %s %v", ev.Kind, err)
	}
	bot.denied(t, "start a run", n.In("booking", "start"), publish(bot.js, n.In("booking", "start")))

	operator, oc := as("operator")
	if got := natstest.Read(t, operator.js, n.AuditStream(), n.Prefix+".audit.>"); len(got) == 0 {
		t.Error("operator: read no audit records")
	}
	if _, err := oc.ListPending(t.Context(), client.PendingQuery{}); err != nil {
		t.Errorf("operator: pending: %v", err)
	}
	if _, err := oc.Checkpoint(t.Context(), "booking", "r-1"); err != nil {
		t.Errorf("operator: checkpoint: %v", err)
	}
	streams := 0
	for range operator.js.StreamNames(t.Context()).Name() {
		streams++
	}
	if streams < 7 {
		t.Errorf("operator: listed %d streams", streams)
	}
	operator.denied(t, "answer a run", n.In("booking", "resume"), publish(operator.js, n.In("booking", "resume")))

	for _, u := range []*user{agent, bot, operator} {
		denyTampering(t, u, n)
	}
	for _, u := range []*user{agent, bot} {
		u.denied(t, "read the audit stream", "$JS.API.STREAM.INFO."+n.AuditStream(), request(u.nc, "$JS.API.STREAM.INFO."+n.AuditStream(), ""))
	}

	admin, _ := as("admin")
	checkIntact(t, admin.js, n)
}

// legalFlow asks one approval for role legal.
func legalFlow() *engine.Flow {
	return engine.NewFlow[map[string]any]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"value": 20000}, ApproverRole: "legal"})
			return err
		}).
		Node("supervise", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "issue_refund", Args: map[string]any{"amount": 4800}, ApproverRole: "supervisor"})
			return err
		}).
		Start("review").Edge("review", "supervise").MustBuild()
}

func TestApproverRolesAreEnforcedByNATSAndByInterlock(t *testing.T) {
	tlsFiles, pw := deployEnv(t)
	n, _ := wire.NewNames("")
	svc, err := interlock.Start(t.Context(), interlock.Config{
		Flows: []*engine.Flow{legalFlow()}, Instance: "test", Concurrency: 4, RequireRoles: true,
		Embedded: &bus.ServerConfig{
			ConfigFile: "../deploy/nats-server.conf", DataDir: t.TempDir(), Host: "127.0.0.1", Port: -1, LazyFsync: true,
			WorkersPassword: os.Getenv("INTERLOCK_WORKERS_PASSWORD"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.WithoutCancel(t.Context())) })
	as := func(name string) (*user, *client.Client) {
		u := connectUser(t, name, svc.URL(), nats.UserInfo(name, pw[name]), nats.RootCAs(tlsFiles.CA))
		return u, client.New(u.nc, u.js, n, "/test/"+name, natstest.Wait)
	}
	_, ac := as("agent")
	if _, err := ac.Start(t.Context(), "contract", "r-legal", nil, nil); err != nil {
		t.Fatal(err)
	}
	in := lastInterruptOf(t, ac, "contract", "r-legal")
	decide := protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve"}

	bot, bc := as("bot")
	// NATS refuses the bot a role it does not hold.
	bot.denied(t, "decide for legal", n.ResumeAs("contract", "legal"), publish(bot.js, n.ResumeAs("contract", "legal")))
	// Interlock refuses a role that is not the approval's.
	ev, err := bc.ResumeWithRole(t.Context(), "contract", "r-legal", "supervisor", decide)
	if err != nil || ev.Kind != "refused" {
		t.Fatalf("supervisor deciding for legal: %s %v", ev.Kind, err)
	}
	var ref protocol.Refused
	if err := ev.Decode(&ref); err != nil || ref.Code != protocol.CodeForbidden || !strings.Contains(ref.Message, "approver role legal") {
		t.Fatalf("refusal = %+v %v", ref, err)
	}
	// With authorization, the plain subject decides no approval.
	ev, err = bc.Resume(t.Context(), "contract", "r-legal", decide)
	if err != nil || ev.Kind != "refused" {
		t.Fatalf("plain resume of an approval: %s %v", ev.Kind, err)
	}
	if err := ev.Decode(&ref); err != nil || ref.Code != protocol.CodeForbidden {
		t.Fatalf("plain resume refusal = %+v", ref)
	}
	// The HTTP API's way: a caller the service vouches for.
	ev, err = svc.ResumeAs(t.Context(), svc.Client("/http"), "contract", "r-legal", protocol.Resume{Decision: "approve", Approver: "typed-in-the-body"}, "lena@example.com", []string{"legal"})
	if err != nil || ev.Kind != "interrupted" {
		t.Fatalf("vouched legal decision: %s %v", ev.Kind, err)
	}
	next := lastInterruptOf(t, bc, "contract", "r-legal")
	ev, err = bc.ResumeWithRole(t.Context(), "contract", "r-legal", "supervisor", protocol.Resume{ResumeToken: next.ResumeToken, Decision: "approve"})
	if err != nil || ev.Kind != "completed" {
		t.Fatalf("supervisor deciding for supervisor: %s %v", ev.Kind, err)
	}
	_, oc := as("operator")
	recs, err := oc.Audit(t.Context(), "contract", "r-legal")
	if err != nil {
		t.Fatal(err)
	}
	var refused, approvedBy []string
	for _, r := range recs {
		switch r.Action {
		case "refused":
			refused = append(refused, string(r.Code))
		case "approved":
			approvedBy = append(approvedBy, r.By)
		}
	}
	if strings.Join(refused, ",") != "forbidden,forbidden" || strings.Join(approvedBy, ",") != "lena@example.com,nats:supervisor" {
		t.Fatalf("audit: refused %v, approved by %v", refused, approvedBy)
	}
	// The operator reads the audit keys the workers published and
	// vouches for every record with them.
	if rep, err := oc.VerifyAudit(t.Context(), "contract", "r-legal"); err != nil || !rep.Intact || rep.Vouched != len(recs) || len(rep.SignedBy) != 1 {
		t.Fatalf("the operator's verify: intact %v, %d of %d vouched for, signed by %v: %v", rep.Intact, rep.Vouched, len(recs), rep.SignedBy, err)
	}
	// A vouch made without the deployment's secret is refused.
	ev, err = svc.Client("/forger").ResumeAs(t.Context(), "contract", "r-legal", protocol.Resume{Decision: "approve"}, []byte("not-the-secret-not-the-secret-xx"), "mallory", []string{"legal"})
	if err != nil || ev.Kind != "refused" {
		t.Fatalf("forged vouch: %s %v", ev.Kind, err)
	}
	if err := ev.Decode(&ref); err != nil || ref.Code != protocol.CodeForbidden || !strings.Contains(ref.Message, "does not verify") || !strings.Contains(ref.Message, "--secret-file") {
		t.Fatalf("forged vouch refusal = %+v", ref)
	}
}

// TestAssignsAreSentOnlyByTheServicesThatVouch checks who may claim,
// release and delegate an approval under the deploy configuration: NATS
// refuses the assign subject to the agent, the bot and the operator; the
// service (as the HTTP API, the inbox and the Slack bridge do) assigns
// vouched for the person it authenticated, and Interlock checks that
// person's roles; a name sent without a vouch is not taken at its word.
func TestAssignsAreSentOnlyByTheServicesThatVouch(t *testing.T) {
	tlsFiles, pw := deployEnv(t)
	n, _ := wire.NewNames("")
	svc, err := interlock.Start(t.Context(), interlock.Config{
		Flows: []*engine.Flow{legalFlow()}, Instance: "test", Concurrency: 4, RequireRoles: true,
		Embedded: &bus.ServerConfig{
			ConfigFile: "../deploy/nats-server.conf", DataDir: t.TempDir(), Host: "127.0.0.1", Port: -1, LazyFsync: true,
			WorkersPassword: os.Getenv("INTERLOCK_WORKERS_PASSWORD"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.WithoutCancel(t.Context())) })
	as := func(name string) (*user, *client.Client) {
		u := connectUser(t, name, svc.URL(), nats.UserInfo(name, pw[name]), nats.RootCAs(tlsFiles.CA))
		return u, client.New(u.nc, u.js, n, "/test/"+name, natstest.Wait)
	}
	_, ac := as("agent")
	if _, err := ac.Start(t.Context(), "contract", "r-assign", nil, nil); err != nil {
		t.Fatal(err)
	}
	in := lastInterruptOf(t, ac, "contract", "r-assign")
	subject := n.In("contract", "assign")
	for _, name := range []string{"agent", "bot", "operator"} {
		u, _ := as(name)
		u.denied(t, "assign an approval", subject, publish(u.js, subject))
	}

	http := svc.Client("/http")
	ev, err := svc.AssignAs(t.Context(), http, "contract", "r-assign", protocol.Assign{Op: protocol.AssignClaim}, "mallory", []string{"sales"})
	var ref protocol.Refused
	if err != nil || ev.Kind != protocol.EventRefused || ev.Decode(&ref) != nil || ref.Code != protocol.CodeForbidden {
		t.Fatalf("a vouched claim without the role: %s %+v %v", ev.Kind, ref, err)
	}
	ev, err = svc.AssignAs(t.Context(), http, "contract", "r-assign", protocol.Assign{Op: protocol.AssignClaim, Reason: "mine"}, "lena@example.com", []string{"legal"})
	var a protocol.Assigned
	if err != nil || ev.Kind != protocol.EventAssigned || ev.Decode(&a) != nil || a.ClaimedBy != "lena@example.com" {
		t.Fatalf("a vouched claim with the role: %s %+v %v", ev.Kind, a, err)
	}
	// The admin may publish an assign, but a name without a vouch is not
	// taken at its word where roles are required.
	_, admin := as("admin")
	for _, op := range []string{protocol.AssignRelease, protocol.AssignClaim} {
		ev, err = admin.Assign(t.Context(), "contract", "r-assign", protocol.Assign{RequestID: in.RequestID, Op: op, By: "lena@example.com"})
		if err != nil || ev.Kind != protocol.EventRefused || ev.Decode(&ref) != nil || ref.Code != protocol.CodeForbidden {
			t.Fatalf("an unvouched %s naming the claimant: %s %+v %v", op, ev.Kind, ref, err)
		}
	}
	_, oc := as("operator")
	recs, err := oc.Audit(t.Context(), "contract", "r-assign")
	if err != nil {
		t.Fatal(err)
	}
	var claims []string
	for _, r := range recs {
		if r.Action == protocol.ActionClaimed {
			claims = append(claims, fmt.Sprintf("%s trusted=%v", r.By, r.Trusted))
		}
	}
	if strings.Join(claims, ",") != "lena@example.com trusted=true" {
		t.Fatalf("claims audited: %v", claims)
	}
}

// TestDeployClusterConfigsFormACluster runs three Interlock services, each
// embedding a node of deploy/cluster/ (its routes moved to loopback ports),
// started at once as three `interlock serve --nats-config` would be: they
// form one cluster, provision every stream with 3 replicas, and run a
// booking started through any node.
func TestDeployClusterConfigsFormACluster(t *testing.T) {
	tlsFiles, pw := deployEnv(t)
	const nodes = 3
	var routes []string
	var ports []int
	for range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[len(ports)-1]))
		l.Close()
	}
	type started struct {
		svc *interlock.Service
		err error
	}
	results := make(chan started, nodes)
	for i := range nodes {
		go func() {
			svc, err := interlock.Start(t.Context(), interlock.Config{
				Flows: []*engine.Flow{booking.Flow()}, Instance: fmt.Sprintf("node-%d", i+1), Secret: natstest.Secret, RequireRoles: true,
				Embedded: &bus.ServerConfig{
					ConfigFile: fmt.Sprintf("../deploy/cluster/nats-%d.conf", i+1), DataDir: t.TempDir(),
					Host: "127.0.0.1", Port: -1, LazyFsync: true, WorkersPassword: pw["workers"],
					Cluster: &bus.ClusterConfig{Host: "127.0.0.1", Port: ports[i], Routes: routes},
				},
			})
			results <- started{svc, err}
		}()
	}
	var svcs []*interlock.Service
	for range nodes {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatal(r.err)
			}
			svcs = append(svcs, r.svc)
			t.Cleanup(func() { _ = r.svc.Stop(context.WithoutCancel(t.Context())) })
		case <-time.After(bus.DefaultClusterWait):
			t.Fatal("the cluster's services did not start")
		}
	}
	n := svcs[0].Names()
	for _, svc := range svcs {
		if !strings.HasPrefix(svc.Server().Name(), "nats-") {
			t.Errorf("node named %q, want the config's server_name", svc.Server().Name())
		}
	}
	s, err := svcs[0].JetStream().Stream(t.Context(), n.InStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Name != "interlock" {
		t.Fatalf("%s: %d replicas in cluster %+v, want 3 in cluster interlock", n.InStream(), info.Config.Replicas, info.Cluster)
	}
	u := connectUser(t, "agent", svcs[2].URL(), nats.UserInfo("agent", pw["agent"]), nats.RootCAs(tlsFiles.CA))
	ac := client.New(u.nc, u.js, n, "/test/agent", natstest.Wait)
	startBooking(t, ac, "r-cluster")
	if in := lastInterrupt(t, ac, "r-cluster"); in.Node != "ask_email" {
		t.Fatalf("interrupt at %s, want ask_email", in.Node)
	}
}
