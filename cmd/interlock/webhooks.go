package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/webhook"
	"github.com/interlockhq/interlock/wire"
)

// webhookFlags are serve's flags of the outbound webhooks.
type webhookFlags struct {
	file *string
}

func addWebhookFlags(fs *flag.FlagSet) webhookFlags {
	return webhookFlags{
		file: fs.String("webhooks", envOr("INTERLOCK_WEBHOOKS", ""), "YAML `file` of the outbound webhook subscriptions (see docs/channels.md), written to the config bucket's webhooks key at start and when it changes; without it the key's subscriptions are delivered"),
	}
}

// service reads the subscriptions file, before anything starts, and
// returns the webhook service, which counts its attempts in m (if set).
// Every process delivers the subscriptions of the key, with or without a
// file.
func (f webhookFlags) service(log *zerolog.Logger, replicas int, m *metrics.Service,
	callbackURL func(ctx context.Context, sub, person, flow, run, requestID string, expires time.Time) (string, error),
) (*webhook.Service, error) {
	cfg := webhook.Config{Logger: log, Replicas: replicas, CallbackURL: callbackURL}
	if *f.file != "" {
		b, err := os.ReadFile(*f.file)
		if err != nil {
			return nil, usagef("--webhooks: %v", err)
		}
		if cfg.Subscriptions, err = webhook.Parse(b, *f.file); err != nil {
			return nil, usagef("--webhooks: %v", err)
		}
		if err := cfg.Subscriptions.Resolve(nil); err != nil {
			return nil, usagef("--webhooks: %s", strings.ReplaceAll(err.Error(), "webhooks: ", ""))
		}
		cfg.File = *f.file
	}
	if m != nil {
		cfg.Observe = func(a webhook.Attempt) { m.ObserveWebhook(a.Subscription, a.Status, a.Took) }
	}
	return webhook.New(cfg)
}

// webhooksUsage says how to run the webhooks commands.
const webhooksUsage = "use: interlock webhooks list, or interlock webhooks deliveries [--subscription NAME] [--status delivered|retrying|dead] [--limit N]"

// webhooksCmd runs `interlock webhooks list` and `interlock webhooks
// deliveries`, which read the config bucket's subscriptions and the
// delivery records over NATS.
func webhooksCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("webhooks", `webhooks list [--file FILE] [--json]
       interlock webhooks deliveries [--subscription NAME] [--status delivered|retrying|dead] [--limit N] [--json]`, stderr)
	cf := &clientFlags{}
	cf.register(fs)
	var q webhook.Query
	fs.StringVar(&q.Subscription, "subscription", "", "only the deliveries of this subscription `name` (deliveries)")
	fs.StringVar(&q.Status, "status", "", "only deliveries of this `status`: "+strings.Join(webhook.Statuses(), ", ")+" (deliveries)")
	fs.IntVar(&q.Limit, "limit", webhook.DefaultLimit, fmt.Sprintf("show the `n` newest deliveries (1 to %d)", webhook.MaxLimit))
	file := fs.String("file", "", "list the subscriptions of this YAML `file` (as --webhooks reads it) instead of those in force, which only the admin user may read (list)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 1 || pos[0] != "list" && pos[0] != "deliveries" {
		return usageOf("webhooks", webhooksUsage)
	}
	if pos[0] == "deliveries" {
		if q.Status != "" && !slices.Contains(webhook.Statuses(), q.Status) {
			return usagef("--status %q: use %s", q.Status, strings.Join(webhook.Statuses(), ", "))
		}
		if q.Limit < 1 || q.Limit > webhook.MaxLimit {
			return usagef("--limit %d: use 1 to %d", q.Limit, webhook.MaxLimit)
		}
	}
	if pos[0] == "list" && *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return usagef("--file: %v", err)
		}
		set, err := webhook.Parse(b, *file)
		if err != nil {
			return usagef("--file: %s", strings.TrimPrefix(err.Error(), "webhooks: "))
		}
		return printWebhooks(set, 0, cf.json, stdout)
	}
	names, err := wire.NewNames(cf.prefix)
	if err != nil {
		return usageError{msg: "--prefix: " + err.Error()}
	}
	conn, err := cf.connConfig()
	if err != nil {
		return err
	}
	nc, js, err := wire.Connect(ctx, conn)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.wait)
	defer cancel()
	if pos[0] == "list" {
		return listWebhooks(ctx, js, names, cf.json, stdout)
	}
	list, more, err := webhook.Deliveries(ctx, js, names, q)
	if err != nil {
		if strings.Contains(err.Error(), "subscription \"") {
			return usagef("--subscription: %s", strings.TrimPrefix(err.Error(), "webhooks: "))
		}
		return err
	}
	if cf.json {
		if list == nil {
			list = []webhook.Delivery{}
		}
		return writeJSON(stdout, map[string]any{"deliveries": list, "more": more})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "No deliveries recorded.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST ATTEMPT\tSUBSCRIPTION\tSTATUS\tATTEMPTS\tHTTP\tEVENT\tRUN\tWEBHOOK-ID\tERROR")
	for _, d := range list {
		code := "-"
		if d.HTTPStatus != 0 {
			code = fmt.Sprint(d.HTTPStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Last.Local().Format(time.DateTime), d.Subscription, d.Status, d.Attempts, code,
			strings.TrimPrefix(d.Type, "io.interlock."), d.Flow+"/"+d.Run, d.WebhookID, cut(strings.ReplaceAll(d.Error, "\n", " "), maxOutcome))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(stdout, "(the %d newest shown; narrow with --subscription or --status, or raise --limit)\n", len(list))
	}
	return nil
}

// listWebhooks prints the subscriptions the config bucket holds, never a
// secret: only where each process reads it.
func listWebhooks(ctx context.Context, js jetstream.JetStream, names wire.Names, asJSON bool, stdout io.Writer) error {
	kv, err := js.KeyValue(ctx, names.ConfigBucket())
	if err != nil {
		return fmt.Errorf("reading bucket %s: %w", names.ConfigBucket(), err)
	}
	e, err := kv.Get(ctx, webhook.Key)
	if isPermissionError(err) {
		return fmt.Errorf("reading key %s of %s: %w; the subscriptions hold their secrets, so only the admin user (or the workers') may read them: connect as admin (--creds, or a nats context of the admin)", webhook.Key, names.ConfigBucket(), err)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if asJSON {
			return writeJSON(stdout, map[string]any{"subscriptions": []any{}})
		}
		fmt.Fprintf(stdout, "No webhook subscriptions (key %s of %s is empty); start interlock serve with --webhooks FILE.\n", webhook.Key, names.ConfigBucket())
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading key %s of %s: %w", webhook.Key, names.ConfigBucket(), err)
	}
	set, err := webhook.Parse(e.Value(), "kv "+names.ConfigBucket()+" "+webhook.Key)
	if err != nil {
		return fmt.Errorf("the subscriptions in force are not the key's value (revision %d), which does not parse: %w", e.Revision(), err)
	}
	return printWebhooks(set, e.Revision(), asJSON, stdout)
}

// printWebhooks prints the subscriptions of set (revision rev of the key,
// 0 for a file), never a secret: only where each process reads it.
func printWebhooks(set *webhook.Set, rev uint64, asJSON bool, stdout io.Writer) error {
	type row struct {
		Name      string   `json:"name"`
		URL       string   `json:"url"`
		Secret    string   `json:"secret"`
		Events    []string `json:"events"`
		Flows     []string `json:"flows,omitempty"`
		Roles     []string `json:"roles,omitempty"`
		RetryFor  string   `json:"retryFor"`
		Timeout   string   `json:"timeout"`
		Callbacks bool     `json:"callbacks,omitempty"`
	}
	rows := []row{}
	for _, s := range set.Subscriptions() {
		secret := "env " + s.SecretEnv
		switch {
		case s.SecretFile != "":
			secret = "file " + s.SecretFile
		case s.Secret != "":
			secret = "inline" // never printed
		}
		rows = append(rows, row{s.Name, webhook.Redact(s.URL), secret, s.Events, s.Flows, s.Roles, s.RetryFor.String(), s.Timeout.String(), s.Callbacks})
	}
	if asJSON {
		out := map[string]any{"subscriptions": rows}
		if rev > 0 {
			out["revision"] = rev
		}
		return writeJSON(stdout, out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "No webhook subscriptions.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tURL\tEVENTS\tFLOWS\tROLES\tSECRET\tRETRY FOR\tTIMEOUT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.URL, strings.Join(r.Events, ","), orAll(r.Flows), orAll(r.Roles), r.Secret, r.RetryFor, r.Timeout)
	}
	return tw.Flush()
}

func orAll(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

// isPermissionError reports whether err is the server refusing a request
// for want of permission (a request to a subject the user may not
// publish times out, or is answered with a permissions violation).
func isPermissionError(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(strings.ToLower(err.Error()), "permission"))
}

// callbackMinter makes the callback URLs of webhook subscriptions that
// ask for them (callbacks: true), once the service has started.
type callbackMinter struct {
	svc func() *interlock.Service
	// base is the public URL of the HTTP API ("" while unknown).
	base atomic.Pointer[string]
}

// mint returns the callback URL of request requestID of a run for
// subscription sub, deciding as person: the same URL on every attempt
// (its id is derived from the subscription and the request), single-use.
func (c *callbackMinter) mint(_ context.Context, sub, person, flow, run, requestID string, expires time.Time) (string, error) {
	svc, base := c.svc(), c.base.Load()
	if svc == nil || base == nil || *base == "" {
		return "", errors.New("callback URLs go to the HTTP API, which is not serving (yet): serve with --http, and --public-url where people and systems reach it")
	}
	now := time.Now()
	if expires.IsZero() {
		expires = now.Add(links.DefaultCallbackTTL)
	}
	sum := sha256.Sum256([]byte("webhook\x00" + sub + "\x00" + flow + "\x00" + run + "\x00" + requestID))
	text, err := svc.Links().Sign(links.Claims{Kind: links.KindCallback, ID: base64.RawURLEncoding.EncodeToString(sum[:16]),
		Flow: flow, Run: run, RequestID: requestID, Person: person, Expires: expires.Add(time.Second - 1).Unix()})
	if err != nil {
		return "", err
	}
	return links.JoinURL(*base, links.CallbackPath, text)
}

// publicURLOf is where people and systems reach the HTTP API: --public-url,
// else http:// and the --http address (an unspecified host read as
// 127.0.0.1).
func publicURLOf(publicURL, httpAddr string) string {
	if publicURL != "" || httpAddr == "" {
		return publicURL
	}
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// startAskCallbacks starts the POSTs of settled asks to their callback
// URLs, each with the answer's receipt.
func startAskCallbacks(ctx context.Context, svc *interlock.Service, log *zerolog.Logger) error {
	if os.Getenv(envAskSecret) != "" {
		log.Warn().Msgf("%s is no longer used: an ask's callback POST carries the answer's receipt, signed with the audit key, which the agent verifies with the public key (docs/asks.md); a secret every agent held let any of them forge another's callback", envAskSecret)
	}
	a, err := webhook.NewAskCallbacks(svc, webhook.AskConfig{Logger: log})
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "webhooks: "))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelStartTimeout)
	defer cancel()
	return svc.Attach(ctx, a)
}

// envAskSecret is the environment variable that held a secret the asks'
// callbacks were signed with; serve warns that it is no longer used.
const envAskSecret = "INTERLOCK_ASK_CALLBACK_SECRET"
