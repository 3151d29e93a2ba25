package soak

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/internal/netns"
	"github.com/interlockhq/interlock/wire"
)

// Fault is a fault ModeNetwork injects.
type Fault string

// The faults of ModeNetwork, each lasting Config.Pause.
const (
	// FaultIsolate cuts one node from the other two (a minority of one).
	FaultIsolate Fault = "isolate"
	// FaultBridge cuts two nodes from each other while both still reach
	// the third: each side sees a majority of its own.
	FaultBridge Fault = "bridge"
	// FaultIsolateLeader cuts the node that leads the runs bucket's
	// stream from the other two.
	FaultIsolateLeader Fault = "isolate-leader"
	// FaultKillNode kills a node with SIGKILL and starts it again after
	// Config.Pause.
	FaultKillNode Fault = "kill-node"
	// FaultPauseNode stops a node with SIGSTOP and continues it after
	// Config.Pause.
	FaultPauseNode Fault = "pause-node"
	// FaultKillWorker kills the worker process with SIGKILL and starts it
	// again at once.
	FaultKillWorker Fault = "kill-worker"
)

// Faults lists ModeNetwork's faults, in the order it injects them.
var Faults = []Fault{FaultIsolate, FaultKillWorker, FaultBridge, FaultKillNode, FaultIsolateLeader, FaultPauseNode}

// The hosts of ModeNetwork: the three nodes of deploy/cluster, under the
// names their configurations route to, and the clients' host.
var (
	nodeHosts  = []string{"nats-1", "nats-2", "nats-3"}
	clientHost = "clients"
)

// The users of deploy/interlock-auth.conf the soak connects as in
// ModeNetwork: the agents as agent, the supervisor as bot (which may
// publish on the supervisor's role subject), the finance lead as admin
// (which may publish anything: the deploy file gives finance's role
// subject to no client user).
const (
	agentUser = "agent"
	botUser   = "bot"
	adminUser = "admin"
)

// healWait bounds how long the cluster takes to be whole again after a
// fault ends.
const healWait = 2 * time.Minute

// network is what ModeNetwork adds to a deployment.
type network struct {
	net *netns.Network
	tls natstest.TLSFiles
	// callbacks receives the asks' callbacks, when Config.Asks.
	callbacks *callbacks
	// upstream is the MCP server behind the gateway, when Config.Gateway.
	upstream *upstream
	// passwords are the deploy users' passwords, by user.
	passwords map[string]string
	worker    *proc // the worker process, on the clients' host
}

// deployNetwork starts ModeNetwork's processes: three nodes of
// deploy/cluster, each `interlock serve --nats-config nats-N.conf` in a
// network namespace of its own, with the configuration's TLS and users,
// and one worker process in the clients' namespace.
func deployNetwork(ctx context.Context, cfg Config, dir string, d *deployment, env []string, serve func(string, ...string) *proc) error {
	deployDir, err := deployFiles(ctx, cfg)
	if err != nil {
		return err
	}
	n, err := netns.New(ctx, append(slices.Clone(nodeHosts), clientHost)...)
	if err != nil {
		return fmt.Errorf("soak: building the network (needs root and ip; see netns.Available): %w", err)
	}
	d.network = &network{net: n}
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if d.network.tls, err = natstest.WriteTLS(tlsDir); err != nil {
		return fmt.Errorf("soak: writing TLS files: %w", err)
	}
	users, err := passwordVariables(filepath.Join(deployDir, "interlock-auth.conf"))
	if err != nil {
		return err
	}
	d.network.passwords = map[string]string{}
	for _, v := range users {
		user := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(v, "INTERLOCK_"), "_PASSWORD"))
		if user == bus.DefaultWorkersUser {
			d.network.passwords[user] = d.workersPassword // environ has it
			continue
		}
		d.network.passwords[user] = randomHex(24)
		env = append(env, v+"="+d.network.passwords[user])
	}
	for _, u := range []string{agentUser, botUser, adminUser} {
		if d.network.passwords[u] == "" {
			return fmt.Errorf("soak: %s has no user %s", filepath.Join(deployDir, "interlock-auth.conf"), u)
		}
	}
	env = append(env, "INTERLOCK_TLS_CERT="+d.network.tls.Cert, "INTERLOCK_TLS_KEY="+d.network.tls.Key, "INTERLOCK_TLS_CA="+d.network.tls.CA)
	var egress []string
	if cfg.Gates {
		egress = append(egress, "--gate-rules", filepath.Join(filepath.Dir(deployDir), examples.GateRulesFile))
	}
	if cfg.Asks {
		// The agents' endpoint for callbacks, on the clients' host, with
		// a certificate of the soak's CA, which serve trusts as the only
		// root (SSL_CERT_FILE), and allowed although its address is
		// private.
		l, err := n.Listen(clientHost, "tcp", ":"+callbackPort)
		if err != nil {
			return fmt.Errorf("soak: the callbacks' listener: %w", err)
		}
		if d.network.callbacks, err = startCallbacks(l, d.network.tls.Cert, d.network.tls.Key); err != nil {
			_ = l.Close()
			return err
		}
		env = append(env, "SSL_CERT_FILE="+d.network.tls.CA)
		egress = append(egress, "--egress-allow", egressAllow())
	}
	inHost := func(p *proc, host string) {
		h, _ := n.Host(host)
		p.args = append([]string{"netns", "exec", h.Namespace, p.bin}, p.args...)
		p.bin, p.env = "ip", env
	}
	var urls []string
	for i, host := range nodeHosts {
		p := serve(host, append([]string{"--nats-config", filepath.Join(deployDir, "cluster", fmt.Sprintf("nats-%d.conf", i+1)),
			"--data-dir", filepath.Join(dir, host)}, egress...)...)
		inHost(p, host)
		d.victims = append(d.victims, p)
		urls = append(urls, "tls://"+host+":4222")
	}
	d.clientURL, d.clustered = strings.Join(urls, ","), true
	errs := make(chan error, len(d.victims))
	for _, p := range d.victims {
		go func() { errs <- p.start(ctx) }()
	}
	for range d.victims {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	w := serve("worker", append([]string{"--nats-url", d.clientURL, "--tls-ca", d.network.tls.CA, "--replicas", strconv.Itoa(cmp.Or(cfg.Replicas, 3))}, egress...)...)
	inHost(w, clientHost)
	d.network.worker = w
	if err := w.start(ctx); err != nil || !cfg.Gateway {
		return err
	}
	return d.network.startGateway(ctx, cfg, dir, d.clientURL, d, env, inHost)
}

// connConfig is how a process outside the network connects to its nodes
// from the clients' host, as user with password and the inbox prefix
// deploy/interlock-auth.conf gives that user.
func (nw *network) connConfig(url, name, user, password, inbox string) (wire.ConnConfig, error) {
	dialer, err := nw.net.Dialer(clientHost)
	if err != nil {
		return wire.ConnConfig{}, err
	}
	return wire.ConnConfig{URL: url, Name: name, User: user, Password: password, InboxPrefix: inbox, TLSCA: nw.tls.CA, Dialer: dialer}, nil
}

// close stops the callbacks' receiver and removes the network, once its
// processes are gone.
func (nw *network) close() error {
	var err error
	if nw.callbacks != nil {
		err = nw.callbacks.close()
	}
	if nw.upstream != nil {
		err = errors.Join(err, nw.upstream.close())
	}
	return errors.Join(err, nw.net.Close())
}

// passwordVariables are the INTERLOCK_*_PASSWORD variables an
// authorization file reads.
func passwordVariables(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	vars := regexp.MustCompile(`\$(INTERLOCK_[A-Z0-9_]+_PASSWORD)\b`).FindAllStringSubmatch(string(b), -1)
	var out []string
	for _, m := range vars {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out, nil
}

// deployFiles is the directory of Interlock's deploy/ configurations:
// Config.Deploy, else the deploy/ of the module the go command runs in.
func deployFiles(ctx context.Context, cfg Config) (string, error) {
	if cfg.Deploy != "" {
		return cfg.Deploy, nil
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/interlockhq/interlock").Output()
	if err != nil {
		return "", fmt.Errorf("soak: finding Interlock's module for its deploy/ files (or set Config.Deploy): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy"), nil
}

// faults injects Faults in turn, one every cfg.Every once the cluster is
// whole again after the one before, until ctx is done or cfg.Kills have
// been injected. Each names the node it strikes in turn as well. It counts
// the faults in rep and the time each took to heal: from the end of the
// fault (the cut healed, the node continued or serving again) to the
// cluster whole again.
func faults(ctx context.Context, cfg Config, d *deployment, js jetstream.JetStream, count *atomic.Int64, rep *faultLog) error {
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	kinds := cfg.Faults
	if len(kinds) == 0 {
		kinds = Faults
	}
	nw := d.network
	for n := 0; cfg.Kills == 0 || n < cfg.Kills; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !whole(ctx, js) {
			n--
			continue
		}
		f := kinds[n%len(kinds)]
		victim := d.victims[(n/len(kinds)+n)%len(d.victims)]
		others := func(p *proc) []string {
			var out []string
			for _, o := range d.victims {
				if o != p {
					out = append(out, o.name)
				}
			}
			return out
		}
		what := ""
		switch f {
		case FaultIsolate, FaultIsolateLeader:
			if f == FaultIsolateLeader {
				leader, err := streamLeader(ctx, js, "KV_"+d.names.RunsBucket())
				i := slices.IndexFunc(d.victims, func(p *proc) bool { return p.name == leader })
				if err != nil || i < 0 {
					n--
					continue
				}
				victim = d.victims[i]
			}
			if err := nw.net.Partition(ctx, []string{victim.name}, others(victim)); err != nil {
				return err
			}
			what = fmt.Sprintf("cut %s from %s", victim.name, strings.Join(others(victim), " and "))
			if err := wait(ctx, cfg.Pause); err != nil {
				return errors.Join(err, nw.net.Heal(context.WithoutCancel(ctx)))
			}
			if err := nw.net.Heal(ctx); err != nil {
				return err
			}
		case FaultBridge:
			o := others(victim)
			if err := nw.net.Cut(ctx, victim.name, o[0]); err != nil {
				return err
			}
			what = fmt.Sprintf("cut %s from %s; %s reaches both", victim.name, o[0], o[1])
			if err := wait(ctx, cfg.Pause); err != nil {
				return errors.Join(err, nw.net.Heal(context.WithoutCancel(ctx)))
			}
			if err := nw.net.Heal(ctx); err != nil {
				return err
			}
		case FaultKillNode:
			if err := victim.kill(); err != nil {
				return err
			}
			_ = wait(ctx, cfg.Pause)
			began := time.Now()
			if err := victim.start(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			what = fmt.Sprintf("killed %s, serving again %s after its restart,", victim.name, time.Since(began).Round(10*time.Millisecond))
		case FaultPauseNode:
			what = "paused " + victim.name
			if err := victim.pause(ctx, cfg.Pause); err != nil {
				return err
			}
		case FaultKillWorker:
			victim = nw.worker
			if err := victim.kill(); err != nil {
				return err
			}
			began := time.Now()
			if err := victim.start(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			what = fmt.Sprintf("killed the worker process, serving again after %s", time.Since(began).Round(10*time.Millisecond))
		}
		count.Add(1)
		ended := time.Now()
		healed := waitWhole(ctx, js)
		took := time.Since(ended)
		if !healed && ctx.Err() != nil {
			// The runs ended meanwhile: the soak stops waiting (its
			// checks retry their reads), and no time to heal is known.
			rep.injected(f)
			return nil
		}
		rep.add(f, took, healed)
		state := "whole again after " + took.Round(10*time.Millisecond).String()
		if !healed {
			state = "NOT whole again within " + healWait.String()
		}
		if f != FaultKillWorker {
			what += " for " + cfg.Pause.String()
		}
		fmt.Fprintf(cfg.Progress, "soak: fault %d, %s: %s; %s\n", n+1, f, what, state)
	}
	return nil
}

// faultLog is what faults did, for the report.
type faultLog struct {
	byKind   map[Fault]int
	heal     map[Fault]time.Duration // the longest time to heal, by kind
	unhealed int
}

func (l *faultLog) add(f Fault, took time.Duration, healed bool) {
	l.injected(f)
	l.heal[f] = max(l.heal[f], took)
	if !healed {
		l.unhealed++
	}
}

// injected counts a fault of kind f.
func (l *faultLog) injected(f Fault) {
	if l.byKind == nil {
		l.byKind, l.heal = map[Fault]int{}, map[Fault]time.Duration{}
	}
	l.byKind[f]++
}

// waitWhole waits until the cluster is whole, for at most healWait, and
// reports whether it is.
func waitWhole(ctx context.Context, js jetstream.JetStream) bool {
	deadline := time.Now().Add(healWait)
	for time.Now().Before(deadline) {
		if whole(ctx, js) {
			return true
		}
		if wait(ctx, 100*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// streamLeader is the server name of the leader of stream name.
func streamLeader(ctx context.Context, js jetstream.JetStream, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return "", err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("soak: %s has no leader", name)
	}
	return info.Cluster.Leader, nil
}

// wait waits for d, or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// watchConn is the connection config of the soak's own watch and checks:
// the workers' user, which may read every stream.
func (d *deployment) watchConn(name string) (wire.ConnConfig, error) {
	if d.network != nil {
		return d.network.connConfig(d.clientURL, name, bus.DefaultWorkersUser, d.workersPassword, bus.WorkerInboxPrefix(d.names))
	}
	return wire.ConnConfig{URL: d.clientURL, User: bus.DefaultWorkersUser, Password: d.workersPassword, Name: name}, nil
}

// agentConn is the connection config of the agents: without credentials
// on the embedded servers, as the deploy configuration's agent user in
// ModeNetwork.
func (d *deployment) agentConn(name string) (wire.ConnConfig, error) {
	if d.network != nil {
		return d.network.connConfig(d.clientURL, name, agentUser, d.network.passwords[agentUser], bus.ClientInboxPrefix(agentUser))
	}
	return wire.ConnConfig{URL: d.clientURL, Name: name}, nil
}

// approvers connects the people who decide refunds, by role: in
// ModeNetwork the supervisor as the bot user and the finance lead as the
// admin, whose decisions are nats:<role>'s; elsewhere without
// credentials, on the role subjects, their decisions recorded by the
// names they type. The connections are closed with a.
func (d *deployment) approvers(ctx context.Context, a *agents) error {
	a.approvers = map[string]*approver{}
	a.authenticated = d.network != nil
	secret, err := bus.ParseSecret(d.secret)
	if err != nil {
		return fmt.Errorf("soak: the deployment's secret: %w", err)
	}
	a.secret = secret
	for role, user := range map[string]string{refund.SupervisorRole: botUser, refund.FinanceLeadRole: adminUser} {
		ap := &approver{role: role, name: approverName(role), entitled: approverName(role)}
		if d.network == nil {
			ap.js = a.js
			a.approvers[role] = ap
			continue
		}
		inbox := bus.ClientInboxPrefix(user)
		if user == adminUser {
			inbox = ""
		}
		conn, err := d.network.connConfig(d.clientURL, "interlock-soak-"+role, user, d.network.passwords[user], inbox)
		if err != nil {
			return err
		}
		nc, js, err := wire.Connect(ctx, conn)
		if err != nil {
			return fmt.Errorf("soak: connecting the %s as %s: %w", role, user, err)
		}
		a.others = append(a.others, nc)
		ap.js, ap.entitled = js, "nats:"+role
		a.approvers[role] = ap
	}
	return nil
}
