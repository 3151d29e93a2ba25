package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Defaults and limits of a subscription.
const (
	// DefaultRetryFor is how long an event is tried when a subscription
	// does not say: 24 hours after it was published.
	DefaultRetryFor = 24 * time.Hour
	// DefaultTimeout bounds one attempt when a subscription does not say.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout is the longest timeout of one attempt.
	MaxTimeout = 5 * time.Minute
	// MaxSourceSize is the largest subscriptions file: what a KV value
	// holds under NATS's default max_payload.
	MaxSourceSize = 1 << 20
	// MaxSubscriptions is the most subscriptions a file may hold.
	MaxSubscriptions = 200

	// SecretPrefix starts a Standard Webhooks secret: whsec_ and the key
	// in base64.
	SecretPrefix = "whsec_"
	// MinSecretBytes and MaxSecretBytes bound a secret's key, as the
	// Standard Webhooks specification recommends.
	MinSecretBytes = 24
	MaxSecretBytes = 64

	maxErrors = 20
	maxURLLen = 2048
)

// nameRE is a subscription's name: one NATS subject token, which names
// its durable consumer (<prefix>-webhook-<name>) and its delivery records.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var (
	roleRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

var (
	topFields = []string{"subscriptions"}
	subFields = []string{"name", "url", "secret", "secretEnv", "secretFile", "events", "flows", "roles",
		"retryFor", "timeout", "callbacks", "callbacksAs", "insecureHttp"}
)

// Subscription is one receiver of webhooks: where they go, signed with
// which secret, and which events.
type Subscription struct {
	// Name is the subscription's name, one subject token.
	Name string
	// URL is where each event is POSTed: https, or http to a loopback
	// host (or anywhere with InsecureHTTP).
	URL string
	// InsecureHTTP lets URL be plain http beyond loopback.
	InsecureHTTP bool
	// Secret is the whsec_ secret itself, or SecretEnv or SecretFile
	// names where each process reads it: an environment variable, or a
	// file. Exactly one is given. The configuration bucket the
	// subscriptions are kept in is read by the workers and the
	// administrator only; an inline secret is never printed or logged.
	Secret                string
	SecretEnv, SecretFile string
	// Events are the event kinds delivered (protocol.EventInterrupted...).
	Events []string
	// Flows, if set, limits the events to these flows.
	Flows []string
	// Roles, if set, limits the events to those of the roles' requests:
	// an event whose data names an approverRole, that role's; one that
	// names none (resumed, expired, cancelled, completed, failed), a run
	// that waited on one of the roles, as its audit records say.
	Roles []string
	// RetryFor is how long after its publication an event is still tried.
	RetryFor time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Callbacks adds a callback URL to interrupted payloads, when the
	// service can make one; CallbacksAs is the person of the directory it
	// decides as (their roles say what it may decide, and the audit
	// records them). Callbacks needs CallbacksAs.
	Callbacks   bool
	CallbacksAs string
}

// Set is a parsed subscriptions file.
type Set struct {
	source []byte
	name   string
	subs   []Subscription
}

// Subscriptions returns the set's subscriptions, in the file's order.
func (s *Set) Subscriptions() []Subscription { return slices.Clone(s.subs) }

// Source returns the YAML the set was parsed from.
func (s *Set) Source() []byte { return bytes.Clone(s.source) }

// Name says where the set came from.
func (s *Set) Name() string { return s.name }

// Error is a problem in a subscriptions file: where, what is wrong and how
// to fix it. [Parse] returns one, or several joined with errors.Join;
// errors.As finds the first.
type Error struct {
	// Source is the name given to Parse.
	Source string
	// Line is the line in the YAML, 0 when the problem has none.
	Line int
	// Subscription is the name of the subscription at fault (or its
	// 1-based position when it has no valid name), "" when none.
	Subscription string
	// Field is the field at fault.
	Field string
	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("webhooks ")
	b.WriteString(e.Source)
	b.WriteString(": ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Subscription != "" {
		fmt.Fprintf(&b, "subscription %s: ", e.Subscription)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Parse reads a subscriptions file:
//
//	subscriptions:
//	  - name: crm
//	    url: https://crm.example.com/hooks/interlock
//	    secretEnv: CRM_WEBHOOK_SECRET
//	    events: [interrupted, resumed, expired]
//	    flows: [refund]
//
// name says where data came from and starts every error. The YAML is read
// strictly: unknown or repeated fields, more than one document and
// anything missing or malformed are refused, every problem (up to 20) in
// the error, each an [*Error]. `subscriptions: []` is valid and delivers
// nothing. Secrets named by secretEnv and secretFile are read later, by
// [Set.Resolve], in each process that delivers.
func Parse(data []byte, name string) (*Set, error) {
	p := &parser{source: name}
	set := p.parse(data)
	if len(p.errs) > 0 {
		if p.more > 0 {
			p.errs = append(p.errs, &Error{Source: name, Msg: fmt.Sprintf("%d more problems not listed; fix the ones above and load again", p.more)})
		}
		return nil, errors.Join(p.errs...)
	}
	return set, nil
}

type parser struct {
	source string
	errs   []error
	more   int
}

func (p *parser) add(line int, sub, field, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, &Error{Source: p.source, Line: line, Subscription: sub, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) parse(data []byte) *Set {
	if len(data) > MaxSourceSize {
		p.add(0, "", "", "the file is %d bytes, more than the %d a KV value holds", len(data), MaxSourceSize)
		return nil
	}
	root, ok := p.document(data)
	if !ok {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.add(root.Line, "", "", "the file must be a mapping with a subscriptions list, e.g. `subscriptions: []`")
		return nil
	}
	fields := p.fields(root, topFields, "")
	list, ok := fields["subscriptions"]
	if !ok || list.Tag == "!!null" {
		p.add(root.Line, "", "subscriptions", "is missing; list the subscriptions under `subscriptions:`, or write `subscriptions: []` for none")
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		p.add(list.Line, "", "subscriptions", "must be a list, each item starting with `- name: ...`")
		return nil
	}
	if len(list.Content) > MaxSubscriptions {
		p.add(list.Line, "", "subscriptions", "has %d subscriptions, more than %d", len(list.Content), MaxSubscriptions)
		return nil
	}
	set := &Set{source: bytes.Clone(data), name: p.source}
	seen := map[string]int{}
	for i, item := range list.Content {
		s, ok := p.subscription(i+1, item)
		if !ok {
			continue
		}
		if line, dup := seen[s.Name]; dup {
			p.add(item.Line, s.Name, "name", "is also the name of the subscription on line %d; give each its own", line)
			continue
		}
		seen[s.Name] = item.Line
		set.subs = append(set.subs, s)
	}
	return set
}

// document reads the one YAML document of data.
func (p *parser) document(data []byte) (root *yaml.Node, ok bool) {
	// The YAML library is fed bytes from a KV value: a panic in it is a
	// refusal, not a crash.
	defer func() {
		if v := recover(); v != nil {
			p.add(0, "", "", "the YAML parser failed on this input (%v); check the file is plain YAML text", v)
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "", "", "the file is empty; write `subscriptions: []` for none")
		} else {
			p.add(0, "", "", "the file is not valid YAML: %s; check the indentation and the colons", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, false
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		p.add(next.Line, "", "", "a second YAML document starts here (or the rest is not valid YAML); keep every subscription in one document")
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.add(0, "", "", "the file is empty; write `subscriptions: []` for none")
		return nil, false
	}
	return doc.Content[0], true
}

// fields returns the values of mapping n by key, refusing unknown and
// repeated keys and aliases.
func (p *parser) fields(n *yaml.Node, known []string, sub string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, sub, "", "a key is not a field name; the fields are %s", strings.Join(known, ", "))
			continue
		}
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("unknown field %q; the fields are %s", k.Value, strings.Join(known, ", "))
			for _, f := range known {
				if strings.EqualFold(f, k.Value) {
					msg = fmt.Sprintf("unknown field %q; did you mean %q? Field names are case-sensitive", k.Value, f)
				}
			}
			p.add(k.Line, sub, "", "%s", msg)
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.add(k.Line, sub, k.Value, "is set twice; keep one")
			continue
		}
		if v.Kind == yaml.AliasNode || k.Kind == yaml.AliasNode {
			p.add(v.Line, sub, k.Value, "is an alias; write the value out")
			continue
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) str(n *yaml.Node, sub, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.add(n.Line, sub, field, "must be a string")
		return "", false
	}
	return n.Value, true
}

func (p *parser) list(n *yaml.Node, sub, field string) ([]string, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return []string{n.Value}, true
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, sub, field, "must be a list, e.g. [a, b]")
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
			p.add(c.Line, sub, field, "must be a list of strings")
			return nil, false
		}
		if !slices.Contains(out, c.Value) {
			out = append(out, c.Value)
		}
	}
	return out, true
}

func (p *parser) boolean(n *yaml.Node, sub, field string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		p.add(n.Line, sub, field, "must be true or false")
		return false
	}
	return b
}

func (p *parser) duration(n *yaml.Node, sub, field string, lo, hi time.Duration) time.Duration {
	s, ok := p.str(n, sub, field)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		p.add(n.Line, sub, field, "%q: use a duration from %s to %s, such as 30s, 10m or 24h", s, lo, hi)
		return 0
	}
	return d
}

// subscription reads the i-th subscription.
func (p *parser) subscription(i int, n *yaml.Node) (Subscription, bool) {
	errs := len(p.errs) + p.more
	who := fmt.Sprintf("#%d", i)
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, who, "", "must be a mapping starting with `- name: ...`")
		return Subscription{}, false
	}
	if name := mapValue(n, "name"); name != nil && name.Kind == yaml.ScalarNode && nameRE.MatchString(name.Value) {
		who = name.Value
	}
	f := p.fields(n, subFields, who)
	s := Subscription{RetryFor: DefaultRetryFor, Timeout: DefaultTimeout}
	if v, ok := f["name"]; !ok {
		p.add(n.Line, who, "name", "is missing; name the subscription (letters, digits, _ and -)")
	} else if s.Name, ok = p.str(v, who, "name"); ok && !nameRE.MatchString(s.Name) {
		p.add(v.Line, who, "name", "%q: use 1 to 64 letters, digits, _ and -; it names the subscription's consumer", s.Name)
	}
	if v, ok := f["insecureHttp"]; ok {
		s.InsecureHTTP = p.boolean(v, who, "insecureHttp")
	}
	if v, ok := f["callbacks"]; ok {
		s.Callbacks = p.boolean(v, who, "callbacks")
	}
	if v, ok := f["callbacksAs"]; ok {
		if s.CallbacksAs, ok = p.str(v, who, "callbacksAs"); ok {
			if err := people.CheckName(s.CallbacksAs); err != nil {
				p.add(v.Line, who, "callbacksAs", "%s: name a person of the directory (interlock people list)", err)
			}
		}
	}
	switch {
	case s.Callbacks && s.CallbacksAs == "":
		p.add(n.Line, who, "callbacksAs", "is missing: callbacks: true needs callbacksAs, the person of the directory whom the callback URLs decide as (their roles say what they may decide)")
	case !s.Callbacks && s.CallbacksAs != "":
		p.add(n.Line, who, "callbacksAs", "is set but callbacks is not: add callbacks: true, or remove callbacksAs")
	}
	if v, ok := f["url"]; !ok {
		p.add(n.Line, who, "url", "is missing; give the receiver's https:// URL")
	} else if s.URL, ok = p.str(v, who, "url"); ok {
		if err := checkURL(s.URL, s.InsecureHTTP); err != nil {
			p.add(v.Line, who, "url", "%s", err)
		}
	}
	given := 0
	if v, ok := f["secret"]; ok {
		given++
		// The value is never repeated: it is a secret.
		if val, ok := p.str(v, who, "secret"); ok {
			if _, err := DecodeSecret(val); err != nil {
				p.add(v.Line, who, "secret", "%s", err)
			}
			s.Secret = val
		}
	}
	for _, k := range []string{"secretEnv", "secretFile"} {
		v, ok := f[k]
		if !ok {
			continue
		}
		given++
		val, ok := p.str(v, who, k)
		if !ok {
			continue
		}
		switch k {
		case "secretEnv":
			if !envNameRE.MatchString(val) {
				p.add(v.Line, who, k, "%q is not an environment variable's name", val)
			}
			s.SecretEnv = val
		case "secretFile":
			if val == "" {
				p.add(v.Line, who, k, "is empty; give the path of a file holding the whsec_ secret")
			}
			s.SecretFile = val
		}
	}
	if given != 1 {
		p.add(n.Line, who, "secretEnv", "give exactly one of secret (the whsec_ secret), secretEnv (a variable holding it) and secretFile (a file holding it); found %d", given)
	}
	if v, ok := f["events"]; !ok {
		p.add(n.Line, who, "events", "is missing; list the event kinds to deliver, from: %s", strings.Join(protocol.Events(), ", "))
	} else if s.Events, ok = p.list(v, who, "events"); ok {
		if len(s.Events) == 0 {
			p.add(v.Line, who, "events", "is empty; list the event kinds to deliver, from: %s", strings.Join(protocol.Events(), ", "))
		}
		for _, e := range s.Events {
			if !slices.Contains(protocol.Events(), e) {
				p.add(v.Line, who, "events", "%q is not an event kind; use: %s", e, strings.Join(protocol.Events(), ", "))
			}
		}
	}
	if v, ok := f["flows"]; ok {
		if s.Flows, ok = p.list(v, who, "flows"); ok {
			for _, fl := range s.Flows {
				if err := protocol.CheckName("flow", fl); err != nil {
					p.add(v.Line, who, "flows", "%q is not a flow name: use [A-Za-z0-9_-], at most 128", fl)
				}
			}
		}
	}
	if v, ok := f["roles"]; ok {
		if s.Roles, ok = p.list(v, who, "roles"); ok {
			for _, r := range s.Roles {
				if !roleRE.MatchString(r) {
					p.add(v.Line, who, "roles", "%q is not a role name: use [A-Za-z0-9_-], at most 128", r)
				}
			}
		}
	}
	if v, ok := f["retryFor"]; ok {
		s.RetryFor = p.duration(v, who, "retryFor", time.Second, 30*24*time.Hour)
	}
	if v, ok := f["timeout"]; ok {
		s.Timeout = p.duration(v, who, "timeout", 100*time.Millisecond, MaxTimeout)
	}
	return s, len(p.errs)+p.more == errs
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// checkURL checks a receiver's URL: absolute, https (or http to loopback,
// or anywhere when insecure), no credentials in it.
func checkURL(raw string, insecure bool) error {
	if len(raw) > maxURLLen {
		return fmt.Errorf("is %d bytes long; keep it under %d", len(raw), maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an absolute URL such as https://receiver.example/hooks/interlock", Redact(raw))
	}
	if u.User != nil {
		return fmt.Errorf("%s holds a user name or password; remove it: receivers check the webhook-signature instead", Redact(raw))
	}
	if u.Fragment != "" {
		return fmt.Errorf("%s has a #fragment, which is never sent; remove it", Redact(raw))
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !insecure && !netaddr.IsLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%s is plain http beyond loopback: events (and the approvals they describe) would cross the network in clear; use https, or add `insecureHttp: true` for a network you trust", Redact(raw))
		}
	default:
		return fmt.Errorf("%s: use an https:// URL", Redact(raw))
	}
	return nil
}

// Redact returns raw without what a URL may hide a credential in: its
// user information and query. It is what logs, records and dead letters
// show of a receiver's URL.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment = ""
	return u.String()
}

// DecodeSecret returns the key of a Standard Webhooks secret: whsec_ and
// 24 to 64 bytes in base64. Its errors never repeat the secret.
func DecodeSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("a secret starts with whsec_ followed by base64, e.g. from: echo whsec_$(openssl rand -base64 32)")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("the part of the secret after whsec_ is not standard base64; make one with: echo whsec_$(openssl rand -base64 32)")
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("the secret's key is %d bytes; use %d to %d random bytes, e.g. from: echo whsec_$(openssl rand -base64 32)", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return key, nil
}

// Env looks up an environment variable, as os.LookupEnv does.
type Env func(name string) (string, bool)

// resolve returns the key of s's secret, read from the environment, its
// file or the value itself.
func (s Subscription) resolve(env Env) ([]byte, error) {
	if env == nil {
		env = os.LookupEnv
	}
	var val, where string
	switch {
	case s.Secret != "":
		val, where = s.Secret, "secret"
	case s.SecretEnv != "":
		v, ok := env(s.SecretEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("webhooks: subscription %s: secretEnv %s is not set in this process; set it to the whsec_ secret", s.Name, s.SecretEnv)
		}
		val, where = v, "secretEnv "+s.SecretEnv
	case s.SecretFile != "":
		b, err := os.ReadFile(s.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("webhooks: subscription %s: reading secretFile: %w", s.Name, err)
		}
		val, where = string(b), "secretFile "+s.SecretFile
	default:
		return nil, fmt.Errorf("webhooks: subscription %s names no secret", s.Name)
	}
	key, err := DecodeSecret(val)
	if err != nil {
		return nil, fmt.Errorf("webhooks: subscription %s: %s: %w", s.Name, where, err)
	}
	return key, nil
}

// Resolve reads the secret of every subscription in this process (from
// its variable or file), and says which cannot be read, and why.
func (s *Set) Resolve(env Env) error {
	var errs []error
	for _, sub := range s.subs {
		if _, err := sub.resolve(env); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
