package slackbridge

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/people"
)

// Defaults of [Config].
const (
	// DefaultAddr is where the interactivity endpoint listens: loopback
	// only, behind the proxy or tunnel that gives Slack its HTTPS URL.
	DefaultAddr = "127.0.0.1:3000"
	// DefaultKeep is how long the bridge remembers a posted message (its
	// channel and ts), counted from its last change.
	DefaultKeep = 30 * 24 * time.Hour
	// DefaultResponseWait is how long an interaction waits for the engine's
	// answer before Slack is answered: Slack wants one within 3 seconds.
	DefaultResponseWait = 2500 * time.Millisecond
	// DefaultTokenEnv and DefaultSigningSecretEnv are the environment
	// variables the bot token and the signing secret are read from when
	// the configuration file names neither a file nor a variable.
	DefaultTokenEnv         = "SLACK_BOT_TOKEN"
	DefaultSigningSecretEnv = "SLACK_SIGNING_SECRET"
)

// User is a Slack user as Interlock knows them: the approver name their
// decisions are audited under, and the approver roles they hold.
type User struct {
	// Name is the approver name in the audit stream (ann@example.com).
	Name string `yaml:"name"`
	// Roles are the approver roles the user holds; none lets them answer
	// questions only.
	Roles []string `yaml:"roles"`
}

// Config configures a [Bridge].
type Config struct {
	// Token is the bot token (xoxb-...). Required.
	Token string
	// SigningSecret verifies that interactions come from Slack. Required.
	SigningSecret string
	// Addr is the host:port of the interactivity endpoint; port 0 picks a
	// free one. Every request is verified with SigningSecret, so another
	// address than loopback is allowed. Defaults to DefaultAddr.
	Addr string
	// Channels maps an approver role to the channel id its approvals are
	// posted in.
	Channels map[string]string
	// DefaultChannel takes questions, choices and approvals whose role
	// Channels does not name. Optional: without it they are not posted
	// (unless the run's origin names a Slack channel).
	DefaultChannel string
	// Users maps a Slack user id (U012AB3CD) to the approver they are.
	// Anyone else's click is refused. The directory of people (People)
	// is asked first; Users are the older way to say it.
	Users map[string]User
	// People returns the directory of people: a Slack user is the person
	// whose slack handle they are (people.Directory.BySlack), and a
	// role's approvals are posted in the role's Slack channel
	// (people.Directory.Role). Users and Channels are asked for whom and
	// what the directory does not know. Optional; a people.Live's Current
	// follows the configuration bucket.
	People func() *people.Directory
	// Keep is how long a posted message is remembered after its last
	// change: a decision after that leaves the message as it was.
	// Defaults to DefaultKeep.
	Keep time.Duration
	// FirstRetry, MaxRetry and RetryFor say how a Slack call that fails
	// is tried again (see notify.Config). Default to notify's defaults.
	FirstRetry, MaxRetry, RetryFor time.Duration
	// ResponseWait bounds how long an interaction waits for the engine
	// before answering Slack. Defaults to DefaultResponseWait.
	ResponseWait time.Duration
	// APIURL is the base URL of Slack's Web API, ending in a slash.
	// Defaults to slack-go's (https://slack.com/api/); tests point it at
	// a fake.
	APIURL string
	// Egress says where the calls to Slack's Web API may connect (see
	// package egress). The zero Policy takes the port's; that default
	// refuses loopback, private and link-local addresses (and the other
	// internal ones) unless they are allowed: a test's fake Slack on
	// 127.0.0.1 is allowed so.
	Egress egress.Policy
	// Logger for the bridge. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.Keep = cmp.Or(c.Keep, DefaultKeep)
	c.ResponseWait = cmp.Or(c.ResponseWait, DefaultResponseWait)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// Validate reports what is wrong with the configuration, its defaults
// filled in: New refuses the same.
func (c Config) Validate() error { return c.withDefaults().validate() }

var (
	slackID = regexp.MustCompile(`^[A-Z0-9]{2,64}$`)
	roleRe  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

func (c Config) validate() error {
	switch {
	case c.Token == "":
		return errors.New("slackbridge: Config.Token is empty: give the bot token (xoxb-...)")
	case c.SigningSecret == "":
		return errors.New("slackbridge: Config.SigningSecret is empty: give the app's signing secret (Basic Information, App Credentials)")
	case c.Keep < time.Minute:
		return fmt.Errorf("slackbridge: Config.Keep %s: keep messages at least 1m", c.Keep)
	case c.ResponseWait < 0 || c.ResponseWait > 3*time.Second:
		return fmt.Errorf("slackbridge: Config.ResponseWait %s: Slack waits 3s at most", c.ResponseWait)
	case c.FirstRetry < 0 || c.MaxRetry < 0 || c.RetryFor < 0:
		return errors.New("slackbridge: Config.FirstRetry, MaxRetry and RetryFor may not be negative")
	}
	if err := c.Egress.Validate(); err != nil {
		return fmt.Errorf("slackbridge: Config.Egress: %w", err)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("slackbridge: Config.Addr %q: %w; use host:port such as %s", c.Addr, err, DefaultAddr)
	}
	for role, ch := range c.Channels {
		if !roleRe.MatchString(role) {
			return fmt.Errorf("slackbridge: Config.Channels: role %q: use 1 to 128 of A-Z, a-z, 0-9, _ and -", role)
		}
		if !slackID.MatchString(ch) {
			return fmt.Errorf("slackbridge: Config.Channels[%s] %q is not a channel id (C0123ABCD: channel details, bottom of the About tab)", role, ch)
		}
	}
	if c.DefaultChannel != "" && !slackID.MatchString(c.DefaultChannel) {
		return fmt.Errorf("slackbridge: Config.DefaultChannel %q is not a channel id (C0123ABCD)", c.DefaultChannel)
	}
	for id, u := range c.Users {
		if !slackID.MatchString(id) {
			return fmt.Errorf("slackbridge: Config.Users: %q is not a Slack user id (U012AB3CD: profile, More, Copy member ID)", id)
		}
		if strings.TrimSpace(u.Name) == "" || len(u.Name) > 256 || strings.ContainsAny(u.Name, ",\r\n") {
			return fmt.Errorf("slackbridge: Config.Users[%s].name %q: give the approver's name (up to 256 bytes, no comma or line break)", id, u.Name)
		}
		for _, r := range u.Roles {
			if !roleRe.MatchString(r) {
				return fmt.Errorf("slackbridge: Config.Users[%s].roles: %q: use 1 to 128 of A-Z, a-z, 0-9, _ and -", id, r)
			}
		}
	}
	return nil
}

// secretRef says where a credential is read from: a file or an
// environment variable, never the configuration file itself.
type secretRef struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

func (s *secretRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: give {file: PATH} or {env: VARIABLE}; a credential is never written in the configuration file", n.Line)
	}
	type plain secretRef
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = secretRef(p)
	return nil
}

func (s secretRef) read(what, defaultEnv string) (string, error) {
	switch {
	case s.File != "" && s.Env != "":
		return "", fmt.Errorf("%s: give file or env, not both", what)
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s: %s is empty", what, s.File)
		}
		return v, nil
	}
	env := cmp.Or(s.Env, defaultEnv)
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		return "", fmt.Errorf("%s: the environment variable %s is not set (or give {file: PATH})", what, env)
	}
	return v, nil
}

// fileConfig is the YAML of a configuration file.
type fileConfig struct {
	BotToken       secretRef         `yaml:"botToken"`
	SigningSecret  secretRef         `yaml:"signingSecret"`
	Listen         string            `yaml:"listen"`
	Channels       map[string]string `yaml:"channels"`
	DefaultChannel string            `yaml:"defaultChannel"`
	Users          map[string]User   `yaml:"users"`
	Keep           string            `yaml:"keep"`
}

// LoadConfig reads a configuration file (see docs/slack.md): the bot
// token and the signing secret come from the files or environment
// variables it names (by default SLACK_BOT_TOKEN and
// SLACK_SIGNING_SECRET), never from the file itself. Unknown keys are
// refused, so a typo does not silently drop a setting.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("slackbridge: %w", err)
	}
	return ParseConfig(b, path)
}

// ParseConfig parses a configuration file's content; name names it in
// errors.
func ParseConfig(b []byte, name string) (Config, error) {
	var f fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("slackbridge: %s: %w", name, err)
	}
	var err error
	cfg := Config{Addr: f.Listen, Channels: f.Channels, DefaultChannel: f.DefaultChannel, Users: f.Users}
	if f.Keep != "" {
		d, err := time.ParseDuration(f.Keep)
		if err != nil {
			return Config{}, fmt.Errorf("slackbridge: %s: keep %q: %w (use 720h for 30 days)", name, f.Keep, err)
		}
		cfg.Keep = d
	}
	if cfg.Token, err = f.BotToken.read("botToken", DefaultTokenEnv); err != nil {
		return Config{}, fmt.Errorf("slackbridge: %s: %w", name, err)
	}
	if cfg.SigningSecret, err = f.SigningSecret.read("signingSecret", DefaultSigningSecretEnv); err != nil {
		return Config{}, fmt.Errorf("slackbridge: %s: %w", name, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, name)
	}
	return cfg, nil
}

// Directory is the configuration's users and role channels as a
// directory of people, named name: each user a person with their roles
// and Slack id, each role of Channels a role with its Slack channel. A
// user whose name is not a person's name (people.CheckName) is an error
// saying which; such users stay the bridge's own (Users).
func (c Config) Directory(name string) (*people.Directory, error) {
	var ps []people.Person
	for _, id := range slices.Sorted(maps.Keys(c.Users)) {
		u := c.Users[id]
		if err := people.CheckName(u.Name); err != nil {
			return nil, fmt.Errorf("slackbridge: %s: users[%s]: %w; rename them to move them to the directory of people", name, id, err)
		}
		ps = append(ps, people.Person{Name: u.Name, Roles: slices.Clone(u.Roles), Slack: id})
	}
	var rs []people.Role
	for _, role := range slices.Sorted(maps.Keys(c.Channels)) {
		rs = append(rs, people.Role{Name: role, Slack: c.Channels[role]})
	}
	d, err := people.New(name, ps, rs)
	if err != nil {
		return nil, fmt.Errorf("slackbridge: %w", err)
	}
	return d, nil
}

// ReadDirectory reads the users and channels of the configuration file at
// path as a directory of people (see [Config.Directory]), without its
// credentials: `interlock people import` moves them to a directory file.
func ReadDirectory(path string) (*people.Directory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("slackbridge: %w", err)
	}
	var f fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("slackbridge: %s: %w", path, err)
	}
	c := Config{Channels: f.Channels, Users: f.Users}
	for role, ch := range c.Channels {
		if !roleRe.MatchString(role) || !slackID.MatchString(ch) {
			return nil, fmt.Errorf("slackbridge: %s: channels: %s: %q: give a role and its channel id (C0123ABCD)", path, role, ch)
		}
	}
	return c.Directory(path)
}
