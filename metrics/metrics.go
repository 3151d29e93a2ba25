package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/wire"
)

// Defaults of [Config].
const (
	// DefaultAddr is where the endpoint listens: loopback only.
	DefaultAddr = "127.0.0.1:9090"
	// DefaultTimeout bounds the JetStream requests of one scrape or one
	// readiness check.
	DefaultTimeout = 2 * time.Second
	// DefaultPendingEvery is how often the pending gauges are counted
	// again from the pending index.
	DefaultPendingEvery = 15 * time.Second
)

// maxActions bounds the values of the action label: the gate's tool names
// come from agents' requests.
const maxActions = 256

// Config configures a [Service].
type Config struct {
	// Addr is the host:port of /metrics, /healthz and /readyz. Defaults
	// to DefaultAddr.
	Addr string
	// InsecurePublic lets Addr be beyond loopback. The metrics name flows,
	// actions and approver roles, and nothing authenticates who reads
	// them. Defaults to false: a non-loopback Addr is refused.
	InsecurePublic bool
	// Timeout bounds the JetStream requests of one scrape or readiness
	// check. Defaults to DefaultTimeout.
	Timeout time.Duration
	// PendingEvery is how often the pending gauges are counted again
	// from the pending index (the <prefix>_pending bucket), which is read
	// whole on the server each time, unless nothing was written to it
	// since the last count; a count waits at least four times as long as
	// the previous one took, so that a large index is not read
	// continuously. The gauges lag the index by up to that much. Defaults
	// to DefaultPendingEvery.
	PendingEvery time.Duration
	// Logger receives the pending counts' and the server's errors.
	// Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.PendingEvery = cmp.Or(c.PendingEvery, DefaultPendingEvery)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

func (c Config) validate() error {
	host, _, err := net.SplitHostPort(c.Addr)
	switch {
	case err != nil:
		return fmt.Errorf("metrics: Config.Addr %q: %w; use host:port such as %s", c.Addr, err, DefaultAddr)
	case c.Timeout < 0:
		return fmt.Errorf("metrics: Config.Timeout is %s; it must be positive (0 for the default)", c.Timeout)
	case c.PendingEvery < 0:
		return fmt.Errorf("metrics: Config.PendingEvery is %s; it must be positive (0 for the default)", c.PendingEvery)
	case !c.InsecurePublic && !netaddr.IsLoopbackHost(host):
		return fmt.Errorf("metrics: Config.Addr %q is beyond loopback; the metrics name flows and approver roles and nothing authenticates their readers: listen on 127.0.0.1, or set Config.InsecurePublic", c.Addr)
	}
	return nil
}

// Service serves Interlock's metrics (/metrics, in the Prometheus text
// format), liveness (/healthz) and readiness (/readyz) on one listener,
// from a registry of its own. It counts what the workers report to
// [Service.Observe], counts the pending interrupts in the pending index
// on the server, and asks JetStream for the consumer's backlog when
// scraped.
type Service struct {
	cfg     Config
	log     zerolog.Logger
	reg     *prometheus.Registry
	counts  *counters
	pending *pendingCounter
	// webhooks counts outbound webhook attempts (ObserveWebhook).
	webhooks *webhooks
	// workerFlows are the flows this process runs (UseFlows).
	workerFlows *workerFlows
	handler     http.Handler

	mu    sync.Mutex
	js    jetstream.JetStream
	names wire.Names
	srv   *http.Server
	addr  string
	stop  context.CancelFunc
	done  bool
	wg    sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// New returns a service; [Service.UseJetStream] gives it the deployment
// to watch, and Start starts it.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: *cfg.Logger, reg: prometheus.NewRegistry(), names: wire.Names{Prefix: wire.DefaultPrefix}}
	flows := &flowSet{names: map[string]bool{}}
	s.pending = newPendingCounter(time.Now, flows)
	s.counts = newCounters(time.Now, flows, func(flow, run string) string {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		defer cancel()
		return s.pending.action(ctx, flow, run)
	})
	s.webhooks = newWebhooks()
	s.workerFlows = &workerFlows{}
	s.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.counts, s.pending, &natsCollector{s: s}, s.webhooks, s.workerFlows,
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	s.handler = mux
	return s, nil
}

// UseFlows gives the service the flows this process runs, by name, with
// their versions: interlock_worker_flow_version reports them, so that a
// query finds the runs waiting on a version no running worker has. The
// interlock service calls it before Start.
func (s *Service) UseFlows(versions map[string]string) {
	s.workerFlows.set(versions)
}

// UseMigrations gives the service the earlier versions of each flow
// whose runs this process carries on by a migration ("*" for every
// version): interlock_worker_flow_version reports them too. The
// interlock service calls it before Start.
func (s *Service) UseMigrations(versions map[string][]string) {
	s.workerFlows.setMigrates(versions)
}

// UseJetStream gives the service the deployment to watch: its JetStream
// context and names. The interlock service calls it before Start.
func (s *Service) UseJetStream(js jetstream.JetStream, names wire.Names) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.js = js
	if names.Prefix != "" {
		s.names = names
	}
}

func (s *Service) deployment() (jetstream.JetStream, wire.Names) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.js, s.names
}

// Registry is the service's registry, for tests and for serving it
// elsewhere.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

// Handler serves /metrics, /healthz and /readyz, as Start does on
// Config.Addr.
func (s *Service) Handler() http.Handler { return s.handler }

// Addr is the address the service listens on once started (the port
// chosen when Config.Addr has port 0); "" before.
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start counts the pending index, keeps counting it every
// Config.PendingEvery, and listens on Config.Addr. It returns once the
// index is counted and the listener accepts connections.
func (s *Service) Start(ctx context.Context) error {
	js, names := s.deployment()
	if js == nil {
		return errors.New("metrics: no JetStream to watch; call UseJetStream before Start")
	}
	s.mu.Lock()
	if s.stop != nil || s.done {
		s.mu.Unlock()
		return errors.New("metrics: service started twice")
	}
	base, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.mu.Unlock()
	fail := func(err error) error {
		_ = s.Stop(context.WithoutCancel(ctx))
		return err
	}
	kv, err := js.KeyValue(ctx, names.PendingBucket())
	if err != nil {
		return fail(fmt.Errorf("metrics: binding bucket %s: %w", names.PendingBucket(), err))
	}
	s.pending.use(kv)
	begin := time.Now()
	if err := s.pending.recount(ctx, s.cfg.Timeout); err != nil {
		return fail(fmt.Errorf("metrics: counting the pending index: %w", err))
	}
	took := time.Since(begin)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.pending.follow(base, s.cfg.PendingEvery, s.cfg.Timeout, took, s.log)
	}()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fail(fmt.Errorf("metrics: listening on %s: %w", s.cfg.Addr, err))
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		_ = ln.Close()
		return errors.New("metrics: stopped while starting")
	}
	s.srv, s.addr = srv, ln.Addr().String()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("metrics endpoint stopped")
		}
	}()
	return nil
}

// Stop closes the listener, lets requests in progress finish until ctx
// ends, and stops counting the pending index. Stopping twice is safe; the
// second call returns what the first did.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.done = true
		srv, stop := s.srv, s.stop
		s.mu.Unlock()
		if srv != nil {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
				s.stopErr = fmt.Errorf("metrics: stopping the endpoint: %w", err)
			}
		}
		if stop != nil {
			stop()
		}
		s.wg.Wait()
	})
	return s.stopErr
}

var workerFlowDesc = prometheus.NewDesc("interlock_worker_flow_version",
	"1 for each flow this worker runs, at its version, and at each earlier version it carries on by a migration (\"*\": every one): runs of a version (interlock_pending_flow_version_runs) that no running worker reports wait for one.",
	[]string{"flow", "version"}, nil)

// workerFlows reports the flows this process runs and their versions.
type workerFlows struct {
	mu       sync.Mutex
	versions map[string]string
	// migrates are the earlier versions this process carries on, by
	// flow ("*": every one).
	migrates map[string][]string
}

func (w *workerFlows) set(versions map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.versions = versions
}

func (w *workerFlows) setMigrates(migrates map[string][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.migrates = migrates
}

// Describe implements [prometheus.Collector].
func (w *workerFlows) Describe(ch chan<- *prometheus.Desc) { ch <- workerFlowDesc }

// Collect implements [prometheus.Collector].
func (w *workerFlows) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for flow, v := range w.versions {
		ch <- prometheus.MustNewConstMetric(workerFlowDesc, prometheus.GaugeValue, 1, flow, v)
		for _, m := range w.migrates[flow] {
			if m != v {
				ch <- prometheus.MustNewConstMetric(workerFlowDesc, prometheus.GaugeValue, 1, flow, m)
			}
		}
	}
}
