package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/internal/kvwatch"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/wire"
)

// Key is the key of the subscriptions' YAML in the configuration bucket
// (<prefix>_config).
const Key = "webhooks"

// DefaultPollFile is how often Config.File is checked for changes.
const DefaultPollFile = 2 * time.Second

// startTimeout bounds binding one subscription's consumer.
const startTimeout = 10 * time.Second

// Attempt is one attempt to deliver an event, as Config.Observe hears it.
type Attempt struct {
	// Subscription is the subscription's name.
	Subscription string
	// Status is what the attempt left the delivery: StatusDelivered,
	// StatusRetrying or StatusDead.
	Status string
	// HTTPStatus is the receiver's status code, 0 when none came.
	HTTPStatus int
	// Took is how long the request took.
	Took time.Duration
}

// Config configures a [Service].
type Config struct {
	// Subscriptions, if set, are written to the configuration bucket at
	// Start (key webhooks), replacing what is there, so that every process
	// delivers them. Without it the service delivers what the key holds.
	Subscriptions *Set
	// File, if set, is the file Subscriptions came from: checked every
	// PollFile, and written to the key again when it changes and parses.
	File string
	// PollFile is how often File is checked. Defaults to DefaultPollFile.
	PollFile time.Duration
	// Env reads the variables secretEnv names. Defaults to os.LookupEnv.
	Env Env
	// CallbackURL, if set, makes the callback URL of an interrupt for
	// the subscriptions that ask (callbacks: true): a single-use URL that
	// settles request requestID of the run as person, until expires (zero
	// when the interrupt has no deadline). It is called on each attempt,
	// and returns the same URL for the same subscription and request.
	CallbackURL func(ctx context.Context, subscription, person, flow, run, requestID string, expires time.Time) (string, error)
	// Observe, if set, hears every attempt (for metrics). It must not
	// block.
	Observe func(Attempt)
	// FirstRetry and MaxRetry bound the delay between attempts (doubling
	// from FirstRetry up to MaxRetry, with jitter). Default to
	// notify.DefaultFirstRetry and notify.DefaultMaxRetry.
	FirstRetry, MaxRetry time.Duration
	// KeepDeliveries is how long delivery records are kept. Defaults to
	// DefaultKeepDeliveries.
	KeepDeliveries time.Duration
	// Replicas of the delivery records' bucket. 0: as many as the
	// deployment's events stream has.
	Replicas int
	// Egress says where the requests may connect (see package egress): a
	// subscription whose URL resolves to a refused address is
	// dead-lettered at once. The zero Policy, the default, refuses
	// loopback, private and link-local addresses (and the other internal
	// ones) unless they are allowed; a service started by an
	// interlock.Service takes its Config.Egress instead (UseEgress).
	// Ignored when Transport is set.
	Egress egress.Policy
	// Transport sends the requests. Defaults to Egress's transport
	// (egress.Policy.Transport): one of one's own is not checked by the
	// policy unless it is built from it. Redirects are never followed.
	Transport http.RoundTripper
	// Logger for the service. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// Service delivers the deployment's events to the webhook subscriptions
// the configuration bucket holds: one durable consumer of the events
// stream per subscription (<prefix>-webhook-<name>), started, replaced
// and deleted as the key changes. It is an interlock.JetStreamUser.
type Service struct {
	cfg    Config
	log    zerolog.Logger
	client *http.Client

	js      jetstream.JetStream
	names   wire.Names
	config  jetstream.KeyValue
	records *records
	sent    *notify.Sent

	mu      sync.Mutex // guards what follows; held while applying a value
	running map[string]*running
	rev     uint64
	refused error
	started bool
	stopped bool

	watcher *kvwatch.Watch
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// running is a subscription this process delivers.
type running struct {
	sub Subscription
	key []byte
	f   *notify.Follower
}

// New returns a service; UseJetStream gives it the deployment and Start
// starts it.
func New(cfg Config) (*Service, error) {
	if cfg.File != "" && cfg.Subscriptions == nil {
		return nil, errors.New("webhooks: Config.File is set without Config.Subscriptions; parse the file with webhook.Parse")
	}
	if cfg.PollFile < 0 || cfg.FirstRetry < 0 || cfg.MaxRetry < 0 || cfg.KeepDeliveries < 0 {
		return nil, errors.New("webhooks: Config.PollFile, FirstRetry, MaxRetry and KeepDeliveries must not be negative (0 for the defaults)")
	}
	if cfg.PollFile == 0 {
		cfg.PollFile = DefaultPollFile
	}
	if cfg.Env == nil {
		cfg.Env = os.LookupEnv
	}
	if err := cfg.Egress.Validate(); err != nil {
		return nil, fmt.Errorf("webhooks: Config.Egress: %w", err)
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	tr := cfg.Transport
	if tr == nil {
		tr = cfg.Egress.Transport()
	}
	return &Service{
		cfg: cfg, log: cfg.Logger.With().Str("component", "webhooks").Logger(),
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		names:   wire.Names{Prefix: wire.DefaultPrefix},
		running: map[string]*running{},
	}, nil
}

// UseJetStream gives the service the deployment: its JetStream context
// and names. The interlock service calls it before Start.
func (s *Service) UseJetStream(js jetstream.JetStream, names wire.Names) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.js = js
	if names.Prefix != "" {
		s.names = names
	}
}

// UseEgress gives the service the outbound policy of the interlock
// service it runs in (interlock.Config.Egress), which it uses unless its
// Config sets Egress or Transport. The interlock service calls it before
// Start.
func (s *Service) UseEgress(p egress.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.cfg.Transport != nil || !s.cfg.Egress.IsZero() {
		return
	}
	s.cfg.Egress = p
	s.client.Transport = p.Transport()
}

// Start writes Config.Subscriptions to the key (if set), starts a
// consumer for each subscription the key holds, and applies the key's
// changes from then on. It returns once the key's current value is
// applied.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.js == nil {
		s.mu.Unlock()
		return errors.New("webhooks: no JetStream; call UseJetStream before Start")
	}
	if s.started {
		s.mu.Unlock()
		return errors.New("webhooks: service started twice")
	}
	s.started = true
	s.mu.Unlock()
	var err error
	if s.config, err = s.js.KeyValue(ctx, s.names.ConfigBucket()); err != nil {
		return fmt.Errorf("webhooks: binding bucket %s: %w", s.names.ConfigBucket(), err)
	}
	if s.records, err = openRecords(ctx, s.js, s.names, s.cfg.KeepDeliveries, s.cfg.Replicas); err != nil {
		return err
	}
	if s.sent, err = notify.OpenSent(ctx, s.js, s.names, 0, s.cfg.Replicas); err != nil {
		return err
	}
	if set := s.cfg.Subscriptions; set != nil {
		if err := Put(ctx, s.config, set); err != nil {
			return err
		}
	}
	// The work outlives ctx; Stop ends it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	kw, err := kvwatch.Start(ctx, s.config, Key, func(e jetstream.KeyValueEntry) {
		if wctx.Err() == nil {
			s.apply(wctx, e)
		}
	}, func() {
		s.log.Warn().Str("key", Key).Msg("webhooks: the watch of the configuration key ended (the NATS connection closed); the subscriptions in force stay until the service restarts")
	})
	if err != nil {
		_ = s.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("webhooks: %w", err)
	}
	s.watcher = kw
	if s.cfg.File != "" {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pollFile(wctx)
		}()
	}
	return nil
}

// Stop stops watching the key and stops every consumer of this process
// (their events in hand finish, or are delivered again later); the
// consumers stay, for the next start. Stopping twice is safe.
func (s *Service) Stop(ctx context.Context) error {
	s.once.Do(func() {
		if s.watcher != nil {
			_ = s.watcher.Stop(ctx)
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopped = true
		for name, r := range s.running {
			_ = r.f.Stop(ctx)
			delete(s.running, name)
		}
	})
	return nil
}

// Running returns the names of the subscriptions this process delivers,
// sorted.
func (s *Service) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Revision is the revision of the key's value in force, 0 before one was
// applied.
func (s *Service) Revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Refused returns why the key's last value was not applied, or why some
// of its subscriptions are not delivered by this process (a secret it
// cannot read), or nil.
func (s *Service) Refused() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Put writes set's YAML to the key, replacing what is there.
func Put(ctx context.Context, kv interface {
	Put(ctx context.Context, key string, value []byte) (uint64, error)
}, set *Set,
) error {
	if set == nil || len(set.source) == 0 {
		return errors.New("webhooks: Put needs a set made by webhook.Parse")
	}
	if _, err := kv.Put(ctx, Key, set.source); err != nil {
		return fmt.Errorf("webhooks: writing the subscriptions of %s to key %s: %w", set.name, Key, err)
	}
	return nil
}

// apply applies or refuses one value of the key.
func (s *Service) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || e.Revision() <= s.rev {
		return
	}
	log := s.log.With().Str("key", Key).Str("bucket", e.Bucket()).Uint64("revision", e.Revision()).Logger()
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		log.Warn().Msg("webhooks: the configuration key was deleted; the subscriptions in force stay. Put `subscriptions: []` to stop every delivery")
		return
	}
	set, err := Parse(e.Value(), "kv "+e.Bucket()+" "+Key)
	if err != nil {
		s.refused = err
		log.Error().Err(err).Uint64("applied_revision", s.rev).Msg("webhooks: refused subscriptions that do not parse; those in force stay. Fix the YAML and put it again")
		return
	}
	s.rev = e.Revision()
	s.refused = s.reconcile(ctx, set, log)
	log.Info().Strs("subscriptions", s.runningNames()).Msg("webhooks: applied the subscriptions")
}

func (s *Service) runningNames() []string {
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// consumerName is the durable consumer of a subscription.
func (s *Service) consumerName(sub string) string { return s.names.Prefix + "-webhook-" + sub }

// reconcile starts, replaces and stops consumers so that this process
// delivers set; the consumers of subscriptions no longer in set are
// deleted. It returns why some subscriptions are not delivered here.
func (s *Service) reconcile(ctx context.Context, set *Set, log zerolog.Logger) error {
	var problems []error
	want := map[string]bool{}
	for _, sub := range set.subs {
		want[sub.Name] = true
		key, err := sub.resolve(s.cfg.Env)
		if err != nil {
			problems = append(problems, err)
			log.Error().Err(err).Str("subscription", sub.Name).Msg("webhooks: this process cannot read the subscription's secret and does not deliver it")
			if r := s.running[sub.Name]; r != nil {
				_ = r.f.Stop(ctx)
				delete(s.running, sub.Name)
			}
			continue
		}
		if r := s.running[sub.Name]; r != nil {
			if reflect.DeepEqual(r.sub, sub) && bytes.Equal(r.key, key) {
				continue
			}
			_ = r.f.Stop(ctx)
			delete(s.running, sub.Name)
		}
		r := &running{sub: sub, key: key}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
		f, err := notify.Follow(bctx, s.js, s.names, notify.Config{
			Name:        s.consumerName(sub.Name),
			Description: "Interlock webhook subscription " + sub.Name + " to " + Redact(sub.URL),
			Kinds:       sub.Events, Flows: sub.Flows,
			FirstRetry: s.cfg.FirstRetry, MaxRetry: s.cfg.MaxRetry, RetryFor: sub.RetryFor,
			AckWait: sub.Timeout + 30*time.Second,
			Logger:  &log,
			// The follower may give up after an attempt the handler
			// did not know was the last (time passed while it ran, or a
			// Retry-After pushed the next past retryFor): the record
			// follows.
			Observe: func(d notify.Delivery, err error, dead bool) {
				if dead {
					s.markDead(sub, d)
				}
			},
		}, func(ctx context.Context, d notify.Delivery) error { return s.deliver(ctx, r, d) })
		cancel()
		if err != nil {
			err = fmt.Errorf("webhooks: subscription %s: %w", sub.Name, err)
			problems = append(problems, err)
			log.Error().Err(err).Str("subscription", sub.Name).Msg("webhooks: could not start delivering the subscription; put the key again to retry")
			continue
		}
		r.f = f
		s.running[sub.Name] = r
	}
	for name, r := range s.running {
		if !want[name] {
			_ = r.f.Stop(ctx)
			delete(s.running, name)
		}
	}
	// Delete the consumers of subscriptions no longer listed, whichever
	// process made them.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	stream, err := s.js.Stream(dctx, s.names.EventStream())
	if err != nil {
		return errors.Join(append(problems, fmt.Errorf("webhooks: listing the consumers of %s: %w", s.names.EventStream(), err))...)
	}
	prefix := s.consumerName("")
	lister := stream.ConsumerNames(dctx)
	var stale []string
	for name := range lister.Name() {
		if sub, ok := strings.CutPrefix(name, prefix); ok && !want[sub] {
			stale = append(stale, name)
		}
	}
	if err := lister.Err(); err != nil {
		problems = append(problems, fmt.Errorf("webhooks: listing the consumers of %s: %w", s.names.EventStream(), err))
	}
	for _, name := range stale {
		// Its consumers of the events and the retry streams, and the
		// attempts it had waiting.
		if err := notify.Remove(dctx, s.js, s.names, name); err != nil {
			problems = append(problems, fmt.Errorf("webhooks: removing the consumers of a removed subscription: %w", err))
			continue
		}
		log.Info().Str("consumer", name).Msg("webhooks: deleted the consumer of a removed subscription")
	}
	return errors.Join(problems...)
}

// pollFile writes Config.File to the key whenever it changes and parses.
func (s *Service) pollFile(ctx context.Context) {
	// What the file held when it was read for Start: a change made since,
	// even before this goroutine runs, is a change.
	var last []byte
	if s.cfg.Subscriptions != nil {
		last = s.cfg.Subscriptions.Source()
	} else {
		last, _ = os.ReadFile(s.cfg.File)
	}
	tick := time.NewTicker(s.cfg.PollFile)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b, err := os.ReadFile(s.cfg.File)
		if err != nil || bytes.Equal(b, last) {
			continue
		}
		last = b
		set, err := Parse(b, s.cfg.File)
		if err != nil {
			s.log.Error().Err(err).Str("file", s.cfg.File).Msg("webhooks: the subscriptions file changed but does not parse; the subscriptions in force stay. Fix it and save it again")
			continue
		}
		if err := Put(ctx, s.config, set); err != nil {
			s.log.Error().Err(err).Str("file", s.cfg.File).Msg("webhooks: the subscriptions file changed but could not be written to the key")
			last = nil // try again on the next tick
			continue
		}
		s.log.Info().Str("file", s.cfg.File).Msg("webhooks: the subscriptions file changed; wrote it to the key")
	}
}
