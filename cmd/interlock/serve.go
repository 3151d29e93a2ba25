package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/wire"
)

// drainTimeout bounds a graceful stop.
const drainTimeout = 30 * time.Second

// tracingFlushTimeout bounds sending the last spans at stop.
const tracingFlushTimeout = 10 * time.Second

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve [flags]", stderr)
	listen := fs.String("listen", envOr("INTERLOCK_LISTEN", "127.0.0.1:4222"), "`host:port` of the embedded NATS server, for the nats CLI and bots (overrides --nats-config's listen when given)")
	dataDir := fs.String("data-dir", envOr("INTERLOCK_DATA_DIR", bus.DefaultDataDir), "`dir` of the embedded server's JetStream files and lock file")
	natsConfig := fs.String("nats-config", envOr("INTERLOCK_NATS_CONFIG", ""), "nats-server configuration `file` for the embedded server (users, TLS, cluster...); see deploy/nats-server.conf")
	insecure := fs.Bool("insecure-no-auth", false, "let the embedded server listen beyond loopback without authentication: anyone who reaches it may start, resume and cancel runs")
	insecureShared := fs.Bool("insecure-shared-account", false, "let --nats-config put client users in the account of Interlock's workers: any of them may then overwrite checkpoints, audit records and events by aiming a reply at them")
	natsUser := fs.String("nats-user", envOr("INTERLOCK_NATS_USER", bus.DefaultWorkersUser), "`user` the workers authenticate as, with the password in INTERLOCK_WORKERS_PASSWORD (with --nats-config or --nats-url)")
	natsURL := fs.String("nats-url", envOr("INTERLOCK_SERVE_NATS_URL", ""), "connect to the NATS server at `url` instead of embedding one (default: $INTERLOCK_SERVE_NATS_URL; client commands read INTERLOCK_NATS_URL, not this)")
	creds := fs.String("creds", envOr("INTERLOCK_CREDS", ""), "NATS credentials `file` (with --nats-url)")
	tlsCert := fs.String("tls-cert", "", "client certificate `file` (with --nats-url)")
	tlsKey := fs.String("tls-key", "", "client key `file` (with --nats-url)")
	tlsCA := fs.String("tls-ca", "", "CA `file` to verify the server (with --nats-url)")
	prefix := fs.String("prefix", envOr("INTERLOCK_PREFIX", wire.DefaultPrefix), "`prefix` of every stream, subject and bucket")
	lazy := fs.Bool("lazy-fsync", false, "let the embedded server acknowledge before data reaches the disk (faster; a power cut can lose acknowledged decisions)")
	secretFile := fs.String("secret-file", "", "`file` holding the resume-token secret: 32+ random bytes in hex or base64, e.g. from openssl rand -hex 32 (or set INTERLOCK_SECRET); default: generated once and kept in NATS")
	instance := fs.String("instance", envOr("INTERLOCK_INSTANCE", ""), "`name` of this process in event sources (default: host name)")
	concurrency := fs.Int("concurrency", bus.DefaultConcurrency, "messages handled at once")
	ackWait := fs.Duration("ack-wait", bus.DefaultAckWait, "how long a command may stay in a worker's hands before it is delivered again (after a worker dies); give every worker of a deployment the same value, at least 1s")
	maxAge := fs.Duration("events-max-age", bus.DefaultEventMaxAge, "how long events are kept (at least the "+bus.DefaultDuplicates.String()+" deduplication window)")
	auditMaxAge := fs.Duration("audit-max-age", bus.DefaultAuditMaxAge, "how long audit records are kept (at least "+bus.DefaultDuplicates.String()+")")
	keepFinished := fs.Duration("keep-finished", kv.DefaultKeepFinished, "how long a finished run's checkpoint is kept, at least 1s (0 keeps them for ever)")
	replicas := fs.String("replicas", envOr("INTERLOCK_REPLICAS", "auto"), "`n` replicas of every stream and bucket: 1, or 3 on a cluster of 3 or more JetStream nodes; auto picks 3 when the server reports such a cluster, else 1")
	serverName := fs.String("server-name", envOr("INTERLOCK_SERVER_NAME", ""), "`name` of the embedded server, unique in its cluster and kept across restarts (default: --nats-config's server_name, else in a cluster the host name and a hash of --data-dir)")
	clusterName := fs.String("cluster-name", envOr("INTERLOCK_CLUSTER_NAME", ""), "`name` of the cluster the embedded server joins, the same on every node (makes it a cluster node)")
	clusterListen := fs.String("cluster-listen", envOr("INTERLOCK_CLUSTER_LISTEN", ""), "`host:port` of the embedded server's route listener, which the other nodes connect to (default 127.0.0.1:6222 on a cluster node)")
	routes := fs.String("routes", envOr("INTERLOCK_ROUTES", ""), "`urls` of every node's route listener, comma-separated, e.g. nats://h1:6222,nats://h2:6222,nats://h3:6222 (this node's may be among them)")
	insecureCluster := fs.Bool("insecure-cluster-no-auth", false, "let the route listener listen beyond loopback without route authentication: anyone who reaches it may join the cluster and read and change every run")
	gateRules := fs.String("gate-rules", envOr("INTERLOCK_GATE_RULES", ""), "YAML `file` of the tool-call gate's rules (see examples/gate/rules.yaml); without it tool requests are dead-lettered unsupported")
	metricsAddr := fs.String("metrics", envOr("INTERLOCK_METRICS", metrics.DefaultAddr), "`host:port` of /metrics, /healthz and /readyz (\"\" turns them off); loopback only, unless --metrics-insecure-public")
	metricsPublic := fs.Bool("metrics-insecure-public", false, "let --metrics listen beyond loopback: the metrics name flows, actions and approver roles, and nothing authenticates who reads them")
	egressAllow := fs.String("egress-allow", envOr("INTERLOCK_EGRESS_ALLOW", ""), "`hosts`, comma-separated, that the outbound calls (webhooks, asks' callback URLs, Teams, Slack) may reach although they resolve to a loopback, private, link-local or other internal address: host names, host:port, IP addresses or CIDR ranges (default: none; public addresses are always reachable)")
	allowStranded := fs.Bool("allow-stranded-runs", false, "start even when runs wait at nodes the flows no longer have and no migration says where they go: they wait for a worker of their own version")
	egressProxy := fs.Bool("egress-proxy-from-env", false, "send the outbound calls through the proxy of HTTPS_PROXY, HTTP_PROXY and NO_PROXY (default: no proxy); the proxy must then refuse internal destinations given by name")
	readRoles := fs.String("read-role", envOr("INTERLOCK_READ_ROLES", ""), "approver `roles`, comma-separated, whose holders read every ask and tool call (auditors), where a directory of people is in force; others read what they asked for or may decide")
	cancelRoles := fs.String("cancel-role", envOr("INTERLOCK_CANCEL_ROLES", ""), "approver `roles`, comma-separated, whose holders cancel any run (operators), where a directory of people is in force; others cancel what they started or may decide")
	logLevel := fs.String("log-level", envOr("INTERLOCK_LOG_LEVEL", "info"), "`level`: trace, debug, info, warn, error")
	logFormat := fs.String("log-format", "auto", "`format`: console, json, or auto (console on a terminal)")
	httpf := addHTTPFlags(fs)
	slackf := addSlackFlags(fs)
	mailf := addMailFlags(fs)
	peoplef := addPeopleFlags(fs)
	hooksf := addWebhookFlags(fs)
	if _, err := parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *maxAge < bus.DefaultDuplicates || *auditMaxAge < bus.DefaultDuplicates {
		return usagef("--events-max-age %v, --audit-max-age %v: keep events and audit records at least %v, the deduplication window", *maxAge, *auditMaxAge, bus.DefaultDuplicates)
	}
	if *keepFinished == 0 {
		*keepFinished = kv.KeepForever
	} else if *keepFinished < time.Second {
		return usagef("--keep-finished %v: use at least 1s, or 0 to keep finished runs for ever", *keepFinished)
	}
	if *ackWait < time.Second {
		return usagef("--ack-wait %v: use at least 1s (a command is handled within 5/6 of it)", *ackWait)
	}
	nReplicas, err := parseReplicas(*replicas)
	if err != nil {
		return err
	}
	clusterGiven := *clusterName != "" || *clusterListen != "" || *routes != "" || *insecureCluster
	if *natsURL != "" && (clusterGiven || *serverName != "") {
		return usagef("--cluster-name, --cluster-listen, --routes and --server-name configure the embedded server; with --nats-url, configure the cluster of that server instead")
	}
	listenGiven := os.Getenv("INTERLOCK_LISTEN") != ""
	fs.Visit(func(f *flag.Flag) { listenGiven = listenGiven || f.Name == "listen" })
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	bridge, slackOn, err := slackf.config(&log)
	if err != nil {
		return err
	}
	dir, err := peoplef.setup(log, httpf.authFileInUse(), &bridge, *slackf.file)
	if err != nil {
		return err
	}
	bridge.People = dir.live.Current
	api, apiOn, err := httpf.config(&log, dir.live.Current)
	if err != nil {
		return err
	}
	mailer, mailOn, err := mailf.config(&log, *httpf.addr, *httpf.publicURL)
	if err != nil {
		return err
	}
	workersPassword := os.Getenv("INTERLOCK_WORKERS_PASSWORD")
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	cfg := interlock.Config{
		Flows:       examples.Flows(),
		Prefix:      *prefix,
		Streams:     bus.StreamConfig{EventMaxAge: *maxAge, AuditMaxAge: *auditMaxAge, Replicas: nReplicas},
		Secret:      secret,
		Instance:    *instance,
		Concurrency: *concurrency,
		AckWait:     *ackWait,
		Logger:      &log,
		Conn:        wire.ConnConfig{URL: *natsURL, CredsFile: *creds, TLSCert: *tlsCert, TLSKey: *tlsKey, TLSCA: *tlsCA, Name: "interlock-serve"},
	}
	cfg.KeepFinished = *keepFinished
	cfg.AllowStrandedRuns = *allowStranded
	if cfg.Egress, err = egressPolicy(*egressAllow, *egressProxy, log); err != nil {
		return err
	}
	cfg.People = dir.live
	if cfg.ReadRoles, err = roleList("--read-role", *readRoles); err != nil {
		return err
	}
	if cfg.CancelRoles, err = roleList("--cancel-role", *cancelRoles); err != nil {
		return err
	}
	// With authorization configured, NATS permissions on the role subjects
	// decide who may approve what.
	cfg.RequireRoles = *natsConfig != "" || *natsURL != ""
	if *gateRules != "" {
		b, err := os.ReadFile(*gateRules)
		if err != nil {
			return usagef("--gate-rules: %v", err)
		}
		if cfg.GateRules, err = gate.Parse(b, *gateRules); err != nil {
			return usagef("--gate-rules: %v", err)
		}
	}
	if *natsURL != "" && workersPassword != "" {
		cfg.Conn.User, cfg.Conn.Password = *natsUser, workersPassword
	}
	if *natsURL == "" {
		host, portStr, err := net.SplitHostPort(*listen)
		if err != nil {
			return usagef("--listen %q: %v; use host:port such as 127.0.0.1:4222", *listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < -1 || port > 65535 {
			return usagef("--listen %q: port must be a number from 0 to 65535", *listen)
		}
		if *natsConfig != "" && !listenGiven {
			host, port = "", 0 // the file's listen, else the default
		}
		cfg.Embedded = &bus.ServerConfig{
			DataDir: *dataDir, Host: host, Port: port, LazyFsync: *lazy, Logger: bus.ServerLogger(log),
			ConfigFile: *natsConfig, InsecureNoAuth: *insecure, InsecureSharedAccount: *insecureShared,
			WorkersUser: *natsUser, WorkersPassword: workersPassword, WorkersCreds: *creds,
			Name: *serverName,
		}
		if clusterGiven {
			cc := &bus.ClusterConfig{Name: *clusterName, InsecureNoAuth: *insecureCluster}
			if *clusterListen != "" {
				h, p, err := net.SplitHostPort(*clusterListen)
				port, perr := strconv.Atoi(p)
				if err != nil || perr != nil || port < -1 || port > 65535 {
					return usagef("--cluster-listen %q: use host:port such as 0.0.0.0:%d", *clusterListen, bus.DefaultClusterPort)
				}
				cc.Host, cc.Port = h, port
			}
			for _, r := range strings.Split(*routes, ",") {
				if r = strings.TrimSpace(r); r != "" {
					cc.Routes = append(cc.Routes, r)
				}
			}
			cfg.Embedded.Cluster = cc
		}
		if *insecureCluster {
			log.Warn().Msg("--insecure-cluster-no-auth: if the route listener listens beyond loopback, ANYONE WHO REACHES ITS PORT MAY JOIN THE CLUSTER AND READ AND CHANGE EVERY RUN; use --nats-config with cluster TLS instead (see deploy/cluster/)")
		}
		if *insecure {
			log.Warn().Msg("--insecure-no-auth: if the embedded server listens beyond loopback without authentication, ANYONE WHO REACHES ITS PORT MAY START, RESUME AND CANCEL RUNS AND READ THEIR STATE; use --nats-config with users instead (see deploy/nats-server.conf)")
		}
	}
	tp, err := tracerProvider(ctx, log, cfg.Egress)
	if err != nil {
		return err
	}
	if tp != nil {
		cfg.TracerProvider = tp
		// After the workers stop: send the spans still batched.
		defer func() {
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
			defer cancel()
			if err := tp.Shutdown(flush); err != nil {
				log.Warn().Err(err).Msg("tracing: spans not sent at stop")
			}
		}()
	}
	m, err := metricsService(*metricsAddr, *metricsPublic, log)
	if err != nil {
		return err
	}
	if m != nil {
		cfg.Observe = m.Observe
		cfg.Services = append(cfg.Services, m)
	}
	// The webhooks' callback URLs are signed with the service's key, once
	// it has started (deliveries begin after).
	var started atomic.Pointer[interlock.Service]
	var push pushDevices
	minter := &callbackMinter{svc: started.Load}
	given := *httpf.publicURL
	minter.base.Store(&given)
	hooks, err := hooksf.service(&log, nReplicas, m, minter.mint)
	if err != nil {
		return err
	}
	cfg.Services = append(cfg.Services, hooks)
	svc, err := interlock.Start(ctx, cfg)
	started.Store(svc)
	if err != nil {
		return unauthenticatedListener(err, *listen, listenGiven, *natsConfig, *clusterListen)
	}
	key := svc.Runner().AuditKey()
	ev := log.Info().Str("nats", wire.RedactURLs(svc.URL())).Strs("flows", svc.Runner().Flows()).Str("prefix", svc.Names().Prefix).
		Str("audit_kid", key.ID).Str("audit_key", key.String())
	if m != nil {
		ev = ev.Str("metrics", "http://"+m.Addr()+"/metrics")
	}
	if tp != nil {
		ev = ev.Bool("tracing", true)
	}
	if cfg.Embedded != nil {
		ev = ev.Str("data_dir", *dataDir).Bool("fsync_before_ack", !*lazy).Str("server_name", svc.Server().Name())
		if u := svc.Server().ClusterURL(); u != "" {
			ev = ev.Str("cluster", u)
		}
	}
	ev.Msg("Interlock is serving; try: interlock start booking")
	fmt.Fprintf(stdout, "Interlock is serving on %s (flows: %s). Press Ctrl-C to stop.\n", wire.RedactURLs(svc.URL()), strings.Join(svc.Runner().Flows(), ", "))
	fmt.Fprintf(stdout, "Audit records are signed with key %s, Ed25519 public key %s; pin it with: interlock audit verify --key %s <flow> <run>\n", key.ID, key, key)
	if err := startAskCallbacks(ctx, svc, &log); err != nil {
		_ = svc.Stop(context.WithoutCancel(ctx))
		return err
	}
	if err := startPeople(ctx, svc, dir); err != nil {
		_ = svc.Stop(context.WithoutCancel(ctx))
		return err
	}
	if apiOn {
		public, err := startHTTP(ctx, svc, api, *httpf.a2aAgents, push.devices, stdout)
		if err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return err
		}
		// Links begin with the API's public URL, known once it listens
		// (--http 127.0.0.1:0 picks its port then).
		minter.base.Store(&public)
		if mailer.try && *httpf.publicURL == "" {
			mailer.publicURL = public
		}
		// Teams: every role whose entry of the directory names a
		// Workflows URL gets its interrupts there, with a button to the
		// inbox; a directory changed later is followed.
		if err := startTeams(ctx, svc, dir.live.Current, public, &log); err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return err
		}
		// Web Push: the approvals that wait on a person reach the devices
		// they subscribed in the inbox.
		if err := startWebPush(ctx, svc, dir.live.Current, public, &push, &log); err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return err
		}
	}
	if slackOn {
		if err := startSlack(ctx, svc, bridge, stdout); err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return err
		}
	}
	if mailOn {
		if err := startMail(ctx, svc, mailer, dir.live.Current, stdout); err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return err
		}
	}
	if m != nil {
		fmt.Fprintf(stdout, "Metrics on http://%s/metrics (liveness /healthz, readiness /readyz).\n", m.Addr())
	}
	<-ctx.Done()
	log.Info().Msg("draining in-flight work; press Ctrl-C again to stop at once")
	drain, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	drain, cancel := context.WithTimeout(drain, drainTimeout)
	defer cancel()
	if err := svc.Stop(drain); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// unauthenticatedListener says, as bad usage, that the embedded server
// refused to listen beyond loopback without authentication, naming the
// flag the address came from; any other error is returned as it is.
func unauthenticatedListener(err error, listen string, listenGiven bool, natsConfig, clusterListen string) error {
	switch {
	case errors.Is(err, bus.ErrNoAuth):
		where := "--listen " + listen
		if natsConfig != "" && !listenGiven {
			where = "--nats-config " + natsConfig
		}
		return usageError{err: err, msg: where + " listens beyond loopback without authentication: anyone who reaches it could start, resume and cancel runs and read their state; " +
			"give --nats-config FILE with users (deploy/nats-server.conf is one), listen on 127.0.0.1, or, on a network you trust, add --insecure-no-auth"}
	case errors.Is(err, bus.ErrNoClusterAuth):
		where := "--cluster-listen " + clusterListen
		if clusterListen == "" {
			where = "--nats-config " + natsConfig
		}
		return usageError{err: err, msg: where + " listens beyond loopback without route authentication: anyone who reaches it could join the cluster and read and change every run, the resume-token secret included; " +
			"give --nats-config FILE whose cluster block has authorization or TLS with verify (deploy/cluster/ has one per node), listen for routes on 127.0.0.1, or, on a network you trust, add --insecure-cluster-no-auth"}
	}
	return err
}

// egressPolicy is the outbound policy of --egress-allow and
// --egress-proxy-from-env.
func egressPolicy(allow string, proxy bool, log zerolog.Logger) (egress.Policy, error) {
	var p egress.Policy
	var err error
	if p.Allow, err = egress.ParseAllow(allow); err != nil {
		return p, usagef("--egress-allow: %v", err)
	}
	if proxy {
		p.Proxy = http.ProxyFromEnvironment
	}
	if len(p.Allow) > 0 {
		log.Info().Strs("egress_allow", p.Allow).Msg("outbound calls may reach these internal destinations")
	}
	return p, nil
}

// parseReplicas reads --replicas: "auto" (0, for the Service to pick),
// 1, 3 or 5.
func parseReplicas(s string) (int, error) {
	if s == "auto" || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n != 1 && n != 3 && n != 5 {
		return 0, usagef("--replicas %q: use 1, 3 (on a cluster of at least 3 JetStream nodes), 5, or auto", s)
	}
	return n, nil
}

// metricsService builds the metrics endpoint of --metrics, or none when
// the address is "". An address beyond loopback needs
// --metrics-insecure-public.
func metricsService(addr string, public bool, log zerolog.Logger) (*metrics.Service, error) {
	if addr == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--metrics %q: %v; use host:port such as %s, or \"\" to turn metrics off", addr, err, metrics.DefaultAddr)
	}
	if !netaddr.IsLoopbackHost(host) {
		if !public {
			return nil, usagef("--metrics %s listens beyond loopback, and the metrics name flows, actions and approver roles to anyone who reaches it: listen on 127.0.0.1 (and scrape from this host), or add --metrics-insecure-public for a network you trust", addr)
		}
		log.Warn().Str("metrics", addr).Msg("--metrics-insecure-public: anyone who reaches this port reads the flows, actions and approver roles in the metrics")
	}
	return metrics.New(metrics.Config{Addr: addr, InsecurePublic: public, Logger: &log})
}

func loadSecret(file string) ([]byte, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading --secret-file: %w", err)
		}
		secret, err := bus.ParseSecret(string(b))
		if err != nil {
			return nil, fmt.Errorf("--secret-file %s: %w", file, err)
		}
		return secret, nil
	case os.Getenv("INTERLOCK_SECRET") != "":
		secret, err := bus.ParseSecret(os.Getenv("INTERLOCK_SECRET"))
		if err != nil {
			return nil, fmt.Errorf("INTERLOCK_SECRET: %w", err)
		}
		return secret, nil
	default:
		return nil, nil
	}
}

func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Logger{}, usagef("--log-level %q: use trace, debug, info, warn or error", level)
	}
	switch format {
	case "auto":
		if isTerminal(w) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	case "json":
	default:
		return zerolog.Logger{}, usagef("--log-format %q: use console, json or auto", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// roleList reads a flag's comma-separated approver roles.
func roleList(flag, v string) ([]string, error) {
	var out []string
	for r := range strings.SplitSeq(v, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if err := people.CheckRole(r); err != nil {
			return nil, usagef("%s: %v", flag, strings.TrimPrefix(err.Error(), "people: "))
		}
		out = append(out, r)
	}
	return out, nil
}
