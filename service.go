// Package interlock runs Interlock: workers that consume CloudEvents from
// NATS JetStream, run flows, pause them on interrupts in a key-value bucket,
// and carry on when the answer comes, on any worker, hours or days later.
//
// [Start] wires the pieces: an embedded NATS server or a connection to an
// external one, the protocol's streams and buckets, the checkpoint store,
// the engine's runner and the workers.
//
//	svc, err := interlock.Start(ctx, interlock.Config{
//		Flows:    []*engine.Flow{booking.Flow()},
//		Embedded: &bus.ServerConfig{DataDir: "interlock-data"},
//	})
//	...
//	defer svc.Stop(context.Background())
package interlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/away"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Defaults of [Config].
const (
	// DefaultInstance names the process in event sources when the host
	// name is unknown.
	DefaultInstance = "local"
)

// Config configures a [Service].
type Config struct {
	// Flows to run. At least one.
	Flows []*engine.Flow
	// Embedded, if set, starts an embedded NATS server; otherwise Conn says
	// which server to connect to.
	Embedded *bus.ServerConfig
	// Conn says how to reach an external NATS server.
	Conn wire.ConnConfig
	// Prefix of every stream, subject and bucket. Defaults to wire.DefaultPrefix.
	Prefix string
	// Streams configures the protocol's streams. Its Replicas, when 0, is
	// picked at start: 3 when the server reports a cluster of at least 3
	// JetStream nodes (or the streams already have more replicas), else 1.
	// Its Logger defaults to Logger.
	Streams bus.StreamConfig
	// Buckets configures the checkpoint store's buckets and finished-runs
	// index. Its Replicas and Duplicates, when 0, are the Streams'; its
	// Retry is theirs.
	Buckets kv.BucketConfig
	// Store, if set, is the checkpoint store the engine uses instead of
	// the KV store on the service's buckets: a store of one's own, or one
	// a test wraps to inject faults. The buckets are provisioned all the
	// same, and clients (interlock show, the inbox, the HTTP API) read
	// checkpoints and the pending index there: a store that writes
	// elsewhere hides its runs from them.
	Store engine.Store
	// KeepFinished is how long a finished run's checkpoint is kept after
	// it finished; JetStream then removes it. kv.KeepForever keeps them.
	// Defaults to kv.DefaultKeepFinished.
	KeepFinished time.Duration
	// Secret keys the resume tokens, and the key that signs audit records
	// is derived from it (see engine.AuditKeyInfo); every worker of a
	// deployment needs the same one, of at least 32 bytes. Defaults to a
	// secret generated once and kept in the <prefix>_keys bucket.
	Secret []byte
	// Instance names this process in event sources (interlock/<instance>).
	// Defaults to the host name, or DefaultInstance.
	Instance string
	// Concurrency is how many messages a worker handles at once. Defaults
	// to bus.DefaultConcurrency.
	Concurrency int
	// AckWait is how long a message may be in a worker's hands before
	// JetStream delivers it to another. Defaults to bus.DefaultAckWait.
	AckWait time.Duration
	// AllowStrandedRuns starts the service even when runs wait at a node
	// one of Flows no longer has (a node renamed or removed by a deploy)
	// and no migration of the flow says where they go: runs of another
	// version then wait for a worker of their version, and runs of the
	// flow's own version fail when answered. Without it, Start refuses,
	// naming the runs, before any answer can be lost.
	AllowStrandedRuns bool
	// MaxDeliver is how many times a failing message is delivered before it
	// is dead-lettered. Defaults to bus.DefaultMaxDeliver.
	MaxDeliver int
	// RequireRoles says the NATS server authenticates its clients and its
	// permissions grant the approver roles' subjects
	// (<prefix>.in.<flow>.resume.<role>): a sender there holds the role,
	// and callers are identified (see People). Set it whenever NATS
	// authorization is configured.
	RequireRoles bool
	// People is the directory of people in force, which the HTTP API,
	// the inbox and the channels authenticate against. While it holds a
	// directory, callers are identified: a name a NATS sender types is a
	// label, never an identity, and approvals are decided only by callers
	// a service of the deployment vouches for (or on role subjects, with
	// RequireRoles). The service follows the configuration bucket's
	// directory (key people) into it before its workers start, and stops
	// following at Stop. Defaults to a directory of the bucket alone.
	People *people.Live
	// CancelRoles are approver roles that may cancel any waiting run,
	// beside whoever started it and whoever may decide it. Optional.
	CancelRoles []string
	// ReadRoles are approver roles that may read any run, an ask's and a
	// tool call's included (auditors). Optional.
	ReadRoles []string
	// GateRules, if set, are the tool-call gate's rules: the service then
	// runs the built-in gate flow, answers tool requests on
	// <prefix>.in.gate.request, writes the rules to the <prefix>_config
	// bucket (key gate.rules) and applies every change made there.
	// Without them tool requests are dead-lettered unsupported.
	GateRules *gate.RuleSet
	// Services are started, in order, once the workers consume, and
	// stopped in reverse order before them: a metrics endpoint, for
	// example. Optional.
	Services []Background
	// Observe, if set, hears what became of every message the workers are
	// done with (see bus.WorkerConfig.Observe): metrics count with it. It
	// must not block. Optional.
	Observe func(bus.Observation)
	// TracerProvider, if set, traces the workers: one span per transition
	// (start, resume, expiry, cancel, reannounce, tool request), a child of
	// the command's traceparent and linked to the run's, whose context the
	// transition's events carry (see bus.WorkerConfig.TracerProvider and
	// docs/operations.md, Tracing). The caller owns it and shuts it down
	// after Stop. Defaults to a no-op provider: nothing is traced.
	TracerProvider trace.TracerProvider
	// Egress is the outbound policy of the calls the channels running on
	// the service make to other systems (see package egress): the asks'
	// callback URLs, Teams and Slack read it through the service
	// (Service.Egress), and a Background among Services that calls out
	// (a webhook.Service) is handed it before it starts (EgressUser);
	// a channel whose own configuration sets a policy keeps its own.
	// Defaults to the zero Policy: loopback, private and link-local
	// addresses (and the other internal ones) are refused unless allowed.
	Egress egress.Policy
	// Logger for the service. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	if c.Instance == "" {
		c.Instance, _ = os.Hostname()
	}
	c.Instance = cmp.Or(c.Instance, DefaultInstance)
	c.Prefix = cmp.Or(c.Prefix, wire.DefaultPrefix)
	return c
}

func (c Config) validate() error {
	switch {
	case len(c.Flows) == 0:
		return errors.New("interlock: Config.Flows is empty; register at least one flow")
	case slices.ContainsFunc(c.Flows, func(f *engine.Flow) bool { return f != nil && f.Name() == engine.AskFlowName }):
		return fmt.Errorf("interlock: Config.Flows has a flow named %s, the name of the built-in flow of asks; rename it", engine.AskFlowName)
	case len(c.Secret) > 0 && len(c.Secret) < 32:
		return fmt.Errorf("interlock: Config.Secret is %d bytes; use at least 32 random bytes, or none for a generated one", len(c.Secret))
	case c.Concurrency < 0:
		return fmt.Errorf("interlock: Config.Concurrency is %d; it must be positive (0 for the default)", c.Concurrency)
	case c.AckWait < 0:
		return fmt.Errorf("interlock: Config.AckWait is %s; it must be positive (0 for the default)", c.AckWait)
	}
	if err := c.Streams.Validate(); err != nil {
		return err
	}
	if err := c.Buckets.Validate(); err != nil {
		return err
	}
	if err := c.Egress.Validate(); err != nil {
		return fmt.Errorf("interlock: Config.Egress: %w", err)
	}
	for i, b := range c.Services {
		if b == nil {
			return fmt.Errorf("interlock: Config.Services[%d] is nil", i)
		}
	}
	return nil
}

// Background is a service that runs beside the workers with the same
// lifecycle: Start returns once it serves, Stop drains it. Stop is called
// once, with a context that bounds the drain.
type Background interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// JetStreamUser is a [Background] that works on the service's own
// connection: before starting it, the service hands it its JetStream
// context and names.
type JetStreamUser interface {
	Background
	UseJetStream(js jetstream.JetStream, names wire.Names)
}

// FlowUser is a [Background] that reports on the flows this process runs
// (metrics): before starting it, the service hands it their names and
// versions.
type FlowUser interface {
	Background
	UseFlows(versions map[string]string)
}

// MigrationUser is a [Background] that reports on the earlier versions
// whose runs this process carries on by its flows' migrations (metrics):
// before starting it, the service hands them over by flow
// ([engine.Flow.Migrates]; "*" for every version).
type MigrationUser interface {
	Background
	UseMigrations(versions map[string][]string)
}

// EgressUser is a [Background] that calls other systems: before starting
// it, the service hands it Config.Egress, which it uses unless its own
// configuration sets a policy.
type EgressUser interface {
	Background
	UseEgress(p egress.Policy)
}

// Service is a running Interlock: NATS (embedded or not), the workers, and
// the background services, with one lifecycle.
type Service struct {
	srv   *bus.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	names wire.Names
	// client is the base of every client Client returns: its copies share
	// one subscription to the deployment's events.
	client  *client.Client
	store   *kv.Store
	runner  *engine.Runner
	worker  *bus.Worker
	started []Background
	once    sync.Once
	// mu guards started against Attach; stopping ends attaching.
	mu       sync.Mutex
	stopping bool
	err      error
	// secret keys resume tokens and vouches; it never leaves the service.
	secret []byte
	// links signs decision links and callback URLs, with a key derived
	// from secret.
	links *links.Signer
	// uses records the links used, each settling its request once.
	uses *links.Uses
	// people is the directory in force; authority decides with it.
	people    *people.Live
	away      *away.Set
	authority *authority.Authority
	// egress is the outbound policy of the channels (Config.Egress).
	egress egress.Policy
}

// Start starts a service and returns once it consumes: NATS reachable,
// streams and buckets provisioned, the audit public key published in the
// <prefix>_config bucket (key audit.keys, see bus.PublishAuditKey), the
// consumer bound, and every background service started.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	names, err := wire.NewNames(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Service{names: names, egress: cfg.Egress}
	fail := func(err error) (*Service, error) {
		_ = s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	conn := cfg.Conn
	conn.InboxPrefix = cmp.Or(conn.InboxPrefix, bus.WorkerInboxPrefix(names))
	if cfg.Embedded != nil {
		embedded := *cfg.Embedded
		embedded.Prefix = names.Prefix
		srv, err := bus.StartServer(ctx, embedded)
		if err != nil {
			return nil, err
		}
		s.srv = srv
		conn = srv.WorkerConn()
	}
	s.nc, s.js, err = wire.Connect(ctx, conn)
	if err != nil {
		return fail(err)
	}
	s.client = client.New(s.nc, s.js, s.names, "", 0)
	streams := cfg.Streams
	if streams.Logger == nil {
		streams.Logger = log
	}
	if streams.Replicas == 0 {
		nodes := s.jetStreamNodes(ctx)
		streams.Replicas = autoReplicas(nodes)
		log.Info().Int("jetstream_nodes", nodes).Int("replicas", streams.Replicas).Msg("replicas of streams and buckets picked for the cluster")
	}
	if err := bus.Provision(ctx, s.js, names, streams); err != nil {
		return fail(err)
	}
	buckets := cfg.Buckets
	buckets.Replicas = cmp.Or(buckets.Replicas, streams.Replicas)
	buckets.Duplicates = cmp.Or(buckets.Duplicates, streams.Duplicates)
	if buckets.Retry == nil {
		buckets.Retry = streams.Retry()
	}
	if err := kv.Provision(ctx, s.js, names, buckets); err != nil {
		return fail(err)
	}
	s.store, err = kv.Open(ctx, s.js, names, kv.Options{KeepFinished: cfg.KeepFinished})
	if err != nil {
		return fail(err)
	}
	var store engine.Store = s.store
	if cfg.Store != nil {
		store = cfg.Store
	}
	secret := cfg.Secret
	if len(secret) == 0 {
		secret, err = bus.StoredSecret(ctx, s.js, names, streams.Replicas)
		if err != nil {
			return fail(err)
		}
		if cfg.Embedded == nil {
			log.Warn().Str("bucket", names.KeysBucket()).Msg("resume tokens use a generated secret kept in NATS; configure a secret for production")
		}
	}
	s.secret = secret
	if s.links, err = links.NewSigner(secret); err != nil {
		return fail(err)
	}
	// As the other buckets: a forming cluster may not answer at once.
	if err := buckets.Retry(ctx, "bucket "+names.LinksBucket(), func(ctx context.Context) error {
		s.uses, err = links.OpenUses(ctx, s.js, names, streams.Replicas)
		return err
	}); err != nil {
		return fail(err)
	}
	// Who is who is known before the first command is taken.
	s.people = cfg.People
	if s.people == nil {
		s.people = people.NewLive(nil)
	}
	config, err := s.js.KeyValue(ctx, names.ConfigBucket())
	if err != nil {
		return fail(fmt.Errorf("interlock: binding bucket %s: %w", names.ConfigBucket(), err))
	}
	if err := s.people.Watch(ctx, config, *log); err != nil {
		return fail(err)
	}
	s.started = append(s.started, peopleWatch{s.people})
	// The absences in force, followed before the first command is taken.
	if s.away, err = away.Watch(ctx, s.js, names, *log); err != nil {
		return fail(err)
	}
	s.started = append(s.started, s.away)
	s.authority = authority.New(authority.Config{
		Identified:   func() bool { return s.people.Current() != nil },
		RoleSubjects: cfg.RequireRoles, CancelRoles: cfg.CancelRoles, ReadRoles: cfg.ReadRoles,
		Absences: s.away.Absences,
		RolesOf: func(name string) ([]string, bool) {
			p, ok := s.people.Current().Person(name)
			return p.Roles, ok
		},
	})
	queue, err := bus.NewQueue(ctx, s.js, names)
	if err != nil {
		return fail(err)
	}
	source := "interlock/" + cfg.Instance
	flows := append(slices.Clone(cfg.Flows), engine.AskFlow(), away.Flow())
	var tools *toolRules
	if cfg.GateRules != nil {
		flows = append(flows, engine.GateFlow())
		live := gate.NewLive(cfg.GateRules)
		g := &gateService{live: live, kv: config, rules: cfg.GateRules, log: *log}
		if err := g.Start(ctx); err != nil {
			return fail(err)
		}
		s.started = append(s.started, g)
		tools = &toolRules{live: live, log: *log}
	}
	signer, err := engine.NewEventSigner(secret)
	if err != nil {
		return fail(err)
	}
	s.runner, err = engine.NewRunner(engine.Config{
		Flows: flows, Store: store, Publisher: bus.NewPublisher(s.js, names, source).SignEvents(signer.Sign),
		Queue: queue, Secret: secret, Source: source, Authority: s.authority, Edits: editsOf(tools),
	})
	if err != nil {
		return fail(err)
	}
	// Before any record is signed, the key that verifies it is where
	// clients read it. This write and the flows' below are retried while
	// a cluster forms, as provisioning is: a node restarted while its
	// peers still elect the bucket's leader has them answered by nobody.
	key := s.runner.AuditKey()
	if err := bus.Ensure(ctx, "the audit key in "+names.ConfigBucket(), func(ctx context.Context) error {
		_, err := bus.PublishAuditKey(ctx, s.js, names, protocol.AuditKey{Kid: key.ID, PublicKey: key.String(), Since: time.Now().UTC()})
		return err
	}); err != nil {
		return fail(err)
	}
	if err := s.checkStranded(ctx, store, flows, cfg.AllowStrandedRuns, *log); err != nil {
		return fail(err)
	}
	for _, f := range flows {
		if err := bus.Ensure(ctx, "the description of flow "+f.Name(), func(ctx context.Context) error {
			return bus.PublishFlowInfo(ctx, s.js, names, f.Info())
		}); err != nil {
			return fail(err)
		}
	}
	// Who runs which version of each flow: interlock flows reads it, and
	// new runs start on the newest.
	versions := map[string]string{}
	for _, f := range flows {
		versions[f.Name()] = f.Version()
	}
	presence, err := bus.NewPresence(ctx, s.js, names, cfg.Instance, versions, 0, *log)
	if err != nil {
		return fail(err)
	}
	migrates := map[string][]string{}
	for _, f := range flows {
		if m := f.Migrates(); len(m) > 0 {
			migrates[f.Name()] = m
		}
	}
	presence.Migrates(migrates)
	running, err := bus.WatchVersions(ctx, s.js, names, presence.Entry())
	if err != nil {
		return fail(err)
	}
	s.started = append(s.started, running)
	s.worker, err = bus.NewWorker(s.js, bus.WorkerConfig{
		Names: names, Runner: s.runner, Concurrency: cfg.Concurrency, Logger: log, Tools: rulesOf(tools),
		Observe: cfg.Observe, TracerProvider: cfg.TracerProvider, Newest: running.Newest,
		AckWait: cfg.AckWait, HandlerTimeout: handlerTimeout(cfg.AckWait), MaxDeliver: cfg.MaxDeliver,
	})
	if err != nil {
		return fail(err)
	}
	if err := s.worker.Start(ctx); err != nil {
		return fail(err)
	}
	s.started = append(s.started, s.worker)
	if err := presence.Start(ctx); err != nil {
		return fail(err)
	}
	s.started = append(s.started, presence)
	if cfg.Store == nil {
		sweep := &pendingSweep{store: s.store, log: *log}
		if err := sweep.Start(ctx); err != nil {
			return fail(err)
		}
		s.started = append(s.started, sweep)
	}
	for _, b := range cfg.Services {
		if u, ok := b.(JetStreamUser); ok {
			u.UseJetStream(s.js, names)
		}
		if u, ok := b.(FlowUser); ok {
			u.UseFlows(maps.Clone(versions))
		}
		if u, ok := b.(MigrationUser); ok {
			u.UseMigrations(maps.Clone(migrates))
		}
		if u, ok := b.(EgressUser); ok {
			u.UseEgress(cfg.Egress)
		}
		if err := b.Start(ctx); err != nil {
			return fail(fmt.Errorf("interlock: starting %T: %w", b, err))
		}
		s.started = append(s.started, b)
	}
	return s, nil
}

// autoReplicas is the replica count of a cluster of nodes JetStream
// nodes: 3 when it can hold them, else 1.
func autoReplicas(nodes int) int {
	if nodes >= 3 {
		return 3
	}
	return 1
}

// jetStreamNodes is how many JetStream nodes the service's server has in
// its cluster. The embedded server knows from its JetStream meta group;
// through a connection, it is the number of servers the connection knows
// of in the cluster (the URLs given and those the cluster advertises), or
// the replicas of the streams already there, whichever is more, so that a
// process that sees less of the cluster never scales the streams down.
func (s *Service) jetStreamNodes(ctx context.Context) int {
	if s.srv != nil {
		return s.srv.JetStreamNodes()
	}
	if s.nc.ConnectedClusterName() == "" {
		return 1
	}
	nodes := len(s.nc.Servers())
	if st, err := s.js.Stream(ctx, s.names.InStream()); err == nil {
		nodes = max(nodes, st.CachedInfo().Config.Replicas)
	}
	return nodes
}

// handlerTimeout keeps a message's handling shorter than its ack wait.
func handlerTimeout(ackWait time.Duration) time.Duration {
	if ackWait == 0 {
		return 0
	}
	return ackWait * 5 / 6
}

// URL is the NATS URL clients use to reach this service's server, with
// any credentials it was given (see wire.RedactURLs for printing it).
func (s *Service) URL() string {
	if s.srv != nil {
		return s.srv.ClientURL()
	}
	return s.nc.ConnectedUrl()
}

// Client returns a client of the wire protocol on the service's own
// connection; source names it in the audit stream.
func (s *Service) Client(source string) *client.Client {
	return s.client.WithSource(source)
}

// peopleWatch stops following the bucket's directory when the service
// stops.
type peopleWatch struct{ live *people.Live }

func (p peopleWatch) Start(context.Context) error    { return nil }
func (p peopleWatch) Stop(ctx context.Context) error { return p.live.Stop(ctx) }

// Away is the absences of the deployment's people (see package away).
func (s *Service) Away() *away.Set { return s.away }

// People is the directory of people in force (see Config.People).
func (s *Service) People() *people.Live { return s.people }

// Authority is what decides, for every surface of the service, what a
// caller may do (see package authority).
func (s *Service) Authority() *authority.Authority { return s.authority }

// ClientAs returns a client of the wire protocol that sends every command
// vouched for caller, whom the surface sending it authenticated, with the
// deployment's secret: the engine then takes caller as who sent it (the
// audit names them, an approval is decided only if they may, a start or
// an ask is theirs). source names the events' sender.
func (s *Service) ClientAs(source string, caller protocol.Caller) (*client.Client, error) {
	return s.client.WithSource(source).Vouched(s.secret, caller)
}

// ResumeAs sends a resume on behalf of a caller the service has
// authenticated, vouched for with the deployment's secret: no token is
// needed, the audit record names approver, and an approval is decided only
// by a caller holding its approver role.
func (s *Service) ResumeAs(ctx context.Context, c *client.Client, flow, run string, r protocol.Resume, approver string, roles []string) (client.Event, error) {
	return c.ResumeAs(ctx, flow, run, r, s.secret, approver, roles)
}

// AssignAs claims, releases or delegates a pending approval on behalf of
// a caller the service has authenticated, vouched for with the
// deployment's secret: the assigned event and the audit record name by,
// and the engine checks that by, holding roles, may decide the approval.
func (s *Service) AssignAs(ctx context.Context, c *client.Client, flow, run string, a protocol.Assign, by string, roles []string) (client.Event, error) {
	return c.AssignAs(ctx, flow, run, a, s.secret, by, roles)
}

// Attach starts b, a service that stands on this one (an HTTP API built
// on its Client and ResumeAs), and stops it with the service: before the
// workers and every service started earlier. b is not attached when its
// Start fails, or when the service is stopping.
func (s *Service) Attach(ctx context.Context, b Background) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errors.New("interlock: attaching a service to a stopped Service")
	}
	if err := b.Start(ctx); err != nil {
		return fmt.Errorf("interlock: starting %T: %w", b, err)
	}
	s.started = append(s.started, b)
	return nil
}

// Links signs and checks the deployment's decision links and callback
// URLs (see package links), with a key derived from its secret.
func (s *Service) Links() *links.Signer { return s.links }

// LinkUses records the links used (bucket <prefix>_links), so that each
// decision link and callback URL settles its request once.
func (s *Service) LinkUses() *links.Uses { return s.uses }

// Server is the embedded NATS server, or nil when the service connects
// to another.
func (s *Service) Server() *bus.Server { return s.srv }

// Names are the service's stream, subject and bucket names.
func (s *Service) Names() wire.Names { return s.names }

// Store is the service's KV checkpoint store (the engine's, unless
// Config.Store gave it another).
func (s *Service) Store() *kv.Store { return s.store }

// Runner is the service's engine runner.
func (s *Service) Runner() *engine.Runner { return s.runner }

// Egress is the outbound policy of the channels running on the service
// (Config.Egress).
func (s *Service) Egress() egress.Policy { return s.egress }

// JetStream is the service's JetStream context.
func (s *Service) JetStream() jetstream.JetStream { return s.js }

// Stop stops the background services and drains the workers, in the
// reverse order of their start (messages in hand finish, or are left to be
// delivered again when ctx ends), closes the connection, and shuts the
// embedded server down. Stopping twice is safe; the second call returns
// what the first did.
func (s *Service) Stop(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		var errs []error
		for i := len(s.started) - 1; i >= 0; i-- {
			if err := s.started[i].Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if s.nc != nil {
			s.nc.Close()
		}
		if s.srv != nil {
			s.srv.Shutdown()
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}
