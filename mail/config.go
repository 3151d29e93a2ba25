package mail

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	netmail "net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/people"
)

// TLS modes of [Config].
const (
	// TLSStartTLS connects in clear and upgrades with STARTTLS, which the
	// server must offer (submission, port 587).
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (port 465).
	TLSImplicit = "tls"
	// TLSNone sends in clear: only to a server on loopback.
	TLSNone = "none"
)

// Defaults of [Config].
const (
	// DefaultTLS is the TLS mode when none is given.
	DefaultTLS = TLSStartTLS
	// DefaultSubjectPrefix starts every subject.
	DefaultSubjectPrefix = "[Interlock]"
	// DefaultLinkTTL is how long a decision link works when its interrupt
	// has no deadline.
	DefaultLinkTTL = 7 * 24 * time.Hour
	// DefaultTimeout bounds a connection to the SMTP server and each of
	// its commands.
	DefaultTimeout = 30 * time.Second
	// DefaultRetryFor is how long a mail is tried before its event is
	// dead-lettered.
	DefaultRetryFor = 24 * time.Hour
)

// Environment variables [LoadConfig] reads; each overrides the file.
const (
	EnvConfig        = "INTERLOCK_SMTP_CONFIG"
	EnvHost          = "INTERLOCK_SMTP_HOST"
	EnvPort          = "INTERLOCK_SMTP_PORT"
	EnvTLS           = "INTERLOCK_SMTP_TLS"
	EnvUsername      = "INTERLOCK_SMTP_USERNAME"
	EnvPassword      = "INTERLOCK_SMTP_PASSWORD"
	EnvFrom          = "INTERLOCK_SMTP_FROM"
	EnvCAFile        = "INTERLOCK_SMTP_CA_FILE"
	EnvSubjectPrefix = "INTERLOCK_SMTP_SUBJECT_PREFIX"
	EnvPublicURL     = "INTERLOCK_PUBLIC_URL"
)

// Config configures a [Mailer].
type Config struct {
	// Host is the SMTP server's host name or address. Required.
	Host string
	// Port is the SMTP server's port. Defaults to 587 for starttls, 465
	// for tls and 25 for none.
	Port int
	// TLS is starttls, tls or none; none is allowed only when Host is
	// loopback. Defaults to DefaultTLS.
	TLS string
	// Username and Password authenticate with the server (SMTP AUTH, the
	// best mechanism it offers), over TLS. Both or neither. The password
	// is never logged.
	Username, Password string
	// RootCAs verify the server's certificate. Defaults to the system's.
	RootCAs *x509.CertPool
	// From is the sender: an address, with or without a display name
	// ("Interlock <interlock@example.com>"). Required.
	From string
	// PublicURL is where people reach Interlock's pages (the decision
	// page, the inbox): https, or http on loopback. Required.
	PublicURL string
	// SubjectPrefix starts every subject. Defaults to DefaultSubjectPrefix;
	// "-" means none.
	SubjectPrefix string
	// Directory returns the directory of people now: who a mail reaches
	// and at which address. Defaults to an empty directory.
	Directory func() *people.Directory
	// LinkTTL is how long a decision link works when its interrupt has no
	// deadline. Defaults to DefaultLinkTTL.
	LinkTTL time.Duration
	// Timeout bounds a connection to the server and each command.
	// Defaults to DefaultTimeout.
	Timeout time.Duration
	// FirstRetry, MaxRetry and RetryFor: how a mail the server does not
	// take is tried again (see notify.Config). RetryFor defaults to
	// DefaultRetryFor, the others to notify's.
	FirstRetry, MaxRetry, RetryFor time.Duration
	// Logger for the mailer. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.TLS = cmp.Or(strings.ToLower(c.TLS), DefaultTLS)
	if c.Port == 0 {
		switch c.TLS {
		case TLSImplicit:
			c.Port = 465
		case TLSNone:
			c.Port = 25
		default:
			c.Port = 587
		}
	}
	switch c.SubjectPrefix {
	case "":
		c.SubjectPrefix = DefaultSubjectPrefix
	case "-":
		c.SubjectPrefix = ""
	}
	if c.Directory == nil {
		empty := people.Empty()
		c.Directory = func() *people.Directory { return empty }
	}
	c.LinkTTL = cmp.Or(c.LinkTTL, DefaultLinkTTL)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.RetryFor = cmp.Or(c.RetryFor, DefaultRetryFor)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// Validate reports what is wrong with the configuration, its defaults
// filled in: New refuses the same.
func (c Config) Validate() error { return c.withDefaults().validate() }

func (c Config) validate() error {
	loopback := netaddr.IsLoopbackHost(c.Host)
	switch {
	case c.Host == "":
		return fmt.Errorf("mail: no SMTP host: set host in the file or %s (smtp.example.com)", EnvHost)
	case strings.ContainsAny(c.Host, " /:\r\n") && !strings.HasPrefix(c.Host, "["):
		return fmt.Errorf("mail: host %q: give a host name or address only; the port goes in port (%s)", c.Host, EnvPort)
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("mail: port %d: use 1 to 65535, such as 587 for starttls or 465 for tls", c.Port)
	case c.TLS != TLSStartTLS && c.TLS != TLSImplicit && c.TLS != TLSNone:
		return fmt.Errorf("mail: tls %q: use starttls (the default, port 587), tls (implicit TLS, port 465) or none (loopback only)", c.TLS)
	case c.TLS == TLSNone && !loopback:
		return fmt.Errorf("mail: tls none sends mail and its decision links in clear to %s: use starttls or tls; none is for a server on loopback only", c.Host)
	case (c.Username == "") != (c.Password == ""):
		return fmt.Errorf("mail: give the username and the password of SMTP AUTH together (username in the file or %s, the password in passwordFile, passwordEnv or %s)", EnvUsername, EnvPassword)
	case c.From == "":
		return fmt.Errorf("mail: no sender: set from in the file or %s (interlock@example.com)", EnvFrom)
	case c.LinkTTL < time.Minute:
		return fmt.Errorf("mail: LinkTTL %s: links need to work at least 1m", c.LinkTTL)
	}
	if _, err := netmail.ParseAddress(c.From); err != nil || strings.ContainsAny(c.From, "\r\n") {
		return fmt.Errorf("mail: from %q is not an address such as interlock@example.com or \"Interlock <interlock@example.com>\"", c.From)
	}
	if strings.ContainsAny(c.SubjectPrefix, "\r\n") {
		return errors.New("mail: subjectPrefix holds a line break; give one line")
	}
	return checkPublicURL(c.PublicURL)
}

// checkPublicURL reports what is wrong with the base URL of the links.
func checkPublicURL(s string) error {
	if s == "" {
		return fmt.Errorf("mail: no public URL: set publicURL in the file or %s to where people reach Interlock's pages (https://interlock.example.com)", EnvPublicURL)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("mail: publicURL %q: give the absolute base URL of Interlock's pages, such as https://interlock.example.com, with no user, query or fragment", s)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && netaddr.IsLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("mail: publicURL %q: decision links are credentials; give an https URL (http only on loopback)", s)
	}
	return fmt.Errorf("mail: publicURL %q: use https://", s)
}

// file is the YAML of a configuration file.
type file struct {
	Host          string `yaml:"host"`
	Port          int    `yaml:"port"`
	TLS           string `yaml:"tls"`
	Username      string `yaml:"username"`
	PasswordFile  string `yaml:"passwordFile"`
	PasswordEnv   string `yaml:"passwordEnv"`
	CAFile        string `yaml:"caFile"`
	From          string `yaml:"from"`
	PublicURL     string `yaml:"publicURL"`
	SubjectPrefix string `yaml:"subjectPrefix"`
	LinkTTL       string `yaml:"linkTTL"`
	RetryFor      string `yaml:"retryFor"`
}

// LoadConfig reads the configuration from the YAML file path (none when
// "") and then from the environment variables getenv reads (Env...),
// which override it. The password is never written in the file: it comes
// from passwordFile, from the variable passwordEnv names, or from
// INTERLOCK_SMTP_PASSWORD. Unknown keys are refused, so that a typo does
// not silently drop a setting. The result is validated.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	var f file
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("mail: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
			if strings.Contains(err.Error(), "field password not found") {
				return Config{}, fmt.Errorf("mail: %s: the password is never written in the file: give passwordFile (a file holding it) or passwordEnv (a variable holding it), or set %s", path, EnvPassword)
			}
			return Config{}, fmt.Errorf("mail: %s: %w; the keys are host, port, tls, username, passwordFile, passwordEnv, caFile, from, publicURL, subjectPrefix, linkTTL and retryFor", path, err)
		}
	}
	env := func(name, v string) string { return cmp.Or(strings.TrimSpace(getenv(name)), v) }
	cfg := Config{
		Host: env(EnvHost, f.Host), TLS: env(EnvTLS, f.TLS), Username: env(EnvUsername, f.Username),
		From: env(EnvFrom, f.From), PublicURL: env(EnvPublicURL, f.PublicURL), SubjectPrefix: env(EnvSubjectPrefix, f.SubjectPrefix),
		Port: f.Port,
	}
	if p := strings.TrimSpace(getenv(EnvPort)); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Config{}, fmt.Errorf("mail: %s %q is not a port number (587, 465)", EnvPort, p)
		}
		cfg.Port = n
	}
	var err error
	if cfg.Password, err = password(f, getenv); err != nil {
		return Config{}, err
	}
	if ca := env(EnvCAFile, f.CAFile); ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return Config{}, fmt.Errorf("mail: caFile: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return Config{}, fmt.Errorf("mail: caFile %s holds no PEM certificate", ca)
		}
	}
	for _, d := range []struct {
		name, v string
		to      *time.Duration
	}{{"linkTTL", f.LinkTTL, &cfg.LinkTTL}, {"retryFor", f.RetryFor, &cfg.RetryFor}} {
		if d.v == "" {
			continue
		}
		if *d.to, err = time.ParseDuration(d.v); err != nil || *d.to <= 0 {
			return Config{}, fmt.Errorf("mail: %s %q: give a duration such as 72h", d.name, d.v)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	d := cfg.withDefaults()
	cfg.TLS, cfg.Port = d.TLS, d.Port
	return cfg, nil
}

// password reads the SMTP password from where the configuration says.
func password(f file, getenv func(string) string) (string, error) {
	switch {
	case f.PasswordFile != "" && f.PasswordEnv != "":
		return "", errors.New("mail: give passwordFile or passwordEnv, not both")
	case f.PasswordFile != "":
		b, err := os.ReadFile(f.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("mail: passwordFile: %w", err)
		}
		p := strings.TrimRight(string(b), "\r\n")
		if p == "" {
			return "", fmt.Errorf("mail: passwordFile %s is empty", f.PasswordFile)
		}
		return p, nil
	case f.PasswordEnv != "":
		p := getenv(f.PasswordEnv)
		if p == "" {
			return "", fmt.Errorf("mail: passwordEnv names %s, which is not set", f.PasswordEnv)
		}
		return p, nil
	}
	return getenv(EnvPassword), nil
}
