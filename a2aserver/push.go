package a2aserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

const (
	// KeepPush is how long a push-notification configuration is kept: a
	// task that has not settled by then is followed with tasks/get.
	KeepPush = 31 * 24 * time.Hour
	// pushTimeout bounds one POST of a push notification.
	pushTimeout = 10 * time.Second
	// HeaderToken carries a configuration's token on its notifications,
	// as A2A says, so that the receiver knows they come from the task it
	// asked about.
	HeaderToken = "X-A2A-Notification-Token"
)

// configID is what a configuration's id may be: a key's token.
var configID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// pushRecord is a configuration as the bucket keeps it: by task and id,
// with who set it, who alone reads, changes and deletes it.
type pushRecord struct {
	TaskID string         `json:"taskId"`
	Config a2a.PushConfig `json:"config"`
	By     string         `json:"by"`
}

// ConsumerName is the durable consumer the push notifications follow the
// asks' answered events with.
func (s *Server) consumerName() string { return s.port.Names().Prefix + "-a2a-push" }

// Start opens the bucket of push-notification configurations and
// follows the settled asks, to POST each task that has one to its URL:
// every process serving the agent shares the one durable consumer, so
// each notification is sent by one of them, retried with backoff, then
// dead-lettered.
func (s *Server) Start(ctx context.Context) error {
	js, names := s.port.JetStream(), s.port.Names()
	cfg := jetstream.KeyValueConfig{
		Bucket:      names.A2APushBucket(),
		Description: "Interlock's A2A agent: the push-notification configurations of tasks",
		History:     1,
		TTL:         KeepPush,
		Replicas:    notify.Replicas(ctx, js, names, 0),
		Storage:     jetstream.FileStorage,
	}
	var kv jetstream.KeyValue
	err := bus.Ensure(ctx, "bucket "+names.A2APushBucket(), func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("a2aserver: binding bucket %s: %w", names.A2APushBucket(), err)
	}
	sent, err := notify.OpenSent(ctx, js, names, 0, 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pushes, s.sent = kv, sent
	s.mu.Unlock()
	f, err := notify.Follow(ctx, js, names, notify.Config{Name: s.consumerName(), Description: "Interlock's A2A push notifications",
		Kinds: []string{protocol.EventAnswered}, Flows: []string{protocol.AskFlow},
		AckWait: pushTimeout + 30*time.Second, Parallel: 4, Logger: &s.log}, s.deliver)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.follower = f
	s.mu.Unlock()
	return nil
}

// Stop stops following.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	f := s.follower
	s.mu.Unlock()
	if f != nil {
		return f.Stop(ctx)
	}
	return nil
}

// bucket is the configurations' bucket, once started.
func (s *Server) bucket() (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pushes == nil {
		return nil, fmt.Errorf("%w: this server's push notifications have not started", a2a.ErrPushNotificationNotSupported)
	}
	return s.pushes, nil
}

// deliver POSTs a settled task to the URL of each of its configurations,
// once each.
func (s *Server) deliver(ctx context.Context, d notify.Delivery) error {
	var ans protocol.Answered
	if err := json.Unmarshal(d.Event.Data(), &ans); err != nil {
		return notify.Permanent(fmt.Errorf("decoding answered: %w", err))
	}
	if !strings.HasPrefix(ans.AskID, taskPrefix) || protocol.CheckName("ask id", ans.AskID) != nil {
		return nil
	}
	kv, err := s.bucket()
	if err != nil {
		return err
	}
	keys, err := kv.ListKeysFiltered(ctx, ans.AskID+".*")
	if err != nil {
		return err
	}
	var todo []string
	for k := range keys.Keys() {
		todo = append(todo, k)
	}
	if len(todo) == 0 {
		return nil
	}
	body, err := json.Marshal(taskOf(ans.AskID, client.AskAnswer{Answered: &ans}))
	if err != nil {
		return notify.Permanent(err)
	}
	var errs []error
	for _, key := range todo {
		done := "a2a-push." + d.Event.ID() + "." + strings.TrimPrefix(key, ans.AskID+".")
		if ok, err := s.sent.Done(ctx, done); err != nil || ok {
			errs = append(errs, err)
			continue
		}
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var rec pushRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			s.log.Warn().Err(err).Str("key", key).Msg("a2a: a push configuration that is not one")
			continue
		}
		if err := s.post(ctx, rec.Config, body); err != nil {
			errs = append(errs, fmt.Errorf("task %s, configuration %s: %w", rec.TaskID, rec.Config.ID, err))
			continue
		}
		errs = append(errs, s.sent.Mark(ctx, done, rec.Config.URL))
	}
	return errors.Join(errs...)
}

// post POSTs a task to a configuration's URL, with its token and its
// bearer credentials. A 4xx but 408 and 429 will not change: it is
// permanent.
func (s *Server) post(ctx context.Context, c a2a.PushConfig, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return notify.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set(HeaderToken, c.Token)
	}
	if a := c.Auth; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", "Bearer "+a.Credentials)
	}
	res, err := s.push.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	_ = res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return nil
	case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests:
		return notify.Permanent(fmt.Errorf("the receiver answered %s", res.Status))
	}
	return fmt.Errorf("the receiver answered %s", res.Status)
}

// checkPushConfig says what is wrong with a configuration a client sets:
// its id, its URL, an address the outbound policy refuses.
func (s *Server) checkPushConfig(c *a2a.PushConfig) error {
	if c.ID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		c.ID = hex.EncodeToString(b)
	}
	if !configID.MatchString(c.ID) {
		return fmt.Errorf("%w: pushNotificationConfig.id %q: use 1 to 64 of A-Z a-z 0-9 _ -", a2a.ErrInvalidParams, c.ID)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: pushNotificationConfig.url %q: use an absolute http or https URL, without user or password (send credentials in authentication)", a2a.ErrInvalidParams, c.URL)
	}
	if a := c.Auth; a != nil && a.Credentials != "" && !containsFold(a.Schemes, "Bearer") {
		return fmt.Errorf("%w: pushNotificationConfig.authentication: Interlock sends credentials as a Bearer token; list \"Bearer\" in schemes", a2a.ErrInvalidParams)
	}
	if addr, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := s.egress.Check(u.Hostname(), netip.AddrPortFrom(addr, portOf(u))); err != nil {
			return fmt.Errorf("%w: pushNotificationConfig.url: %v", a2a.ErrInvalidParams, err)
		}
	}
	return nil
}

func portOf(u *url.URL) uint16 {
	var p uint16
	if _, err := fmt.Sscan(u.Port(), &p); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// setPush keeps a configuration of task id, set by c: a configuration of
// the same id set by another caller is theirs, not replaced.
func (s *Server) setPush(ctx context.Context, c authority.Caller, id a2a.TaskID, cfg a2a.PushConfig) (*a2a.TaskPushConfig, error) {
	if err := s.checkPushConfig(&cfg); err != nil {
		return nil, err
	}
	kv, err := s.bucket()
	if err != nil {
		return nil, err
	}
	key := string(id) + "." + cfg.ID
	b, err := json.Marshal(pushRecord{TaskID: string(id), Config: cfg, By: c.Name})
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = kv.Create(ctx, key, b)
	case err != nil:
	default:
		var old pushRecord
		if json.Unmarshal(e.Value(), &old) == nil && old.By != c.Name {
			return nil, fmt.Errorf("%w: task %s has a push configuration %s of another caller; give yours another id", a2a.ErrInvalidParams, id, cfg.ID)
		}
		_, err = kv.Update(ctx, key, b, e.Revision())
	}
	if err != nil {
		return nil, s.failed(c, "keeping a push configuration", err)
	}
	return &a2a.TaskPushConfig{TaskID: id, Config: cfg}, nil
}

// pushesOf are the configurations c set on task id.
func (s *Server) pushesOf(ctx context.Context, c authority.Caller, id a2a.TaskID) ([]*a2a.TaskPushConfig, error) {
	kv, err := s.bucket()
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeysFiltered(ctx, string(id)+".*")
	if err != nil {
		return nil, s.failed(c, "listing push configurations", err)
	}
	out := []*a2a.TaskPushConfig{}
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue
		}
		var rec pushRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.By == c.Name {
			out = append(out, &a2a.TaskPushConfig{TaskID: id, Config: rec.Config})
		}
	}
	return out, nil
}
