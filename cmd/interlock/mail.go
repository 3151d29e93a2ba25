package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/mail"
	"github.com/interlockhq/interlock/people"
)

// mailFlags are serve's flags of the e-mail channel.
type mailFlags struct {
	file *string
	try  *bool
}

func addMailFlags(fs *flag.FlagSet) mailFlags {
	return mailFlags{
		file: fs.String("smtp-config", envOr(mail.EnvConfig, ""), "YAML `file` of the e-mail channel (see docs/channels-mail.md): SMTP host, port, tls, username, from, publicURL; the password comes from the file or variable it names, or INTERLOCK_SMTP_PASSWORD; INTERLOCK_SMTP_* variables override it, and configure mail without a file"),
		try:  fs.Bool("try-mail", false, "mail to a test SMTP server on loopback that prints each mail's recipient, subject and link here instead of sending it (for trying Interlock out; not with --smtp-config)"),
	}
}

// mailSetup is the e-mail channel serve starts.
type mailSetup struct {
	cfg mail.Config
	// try starts the try server, and links to publicURL.
	try       bool
	publicURL string
}

// config reads the channel's configuration, before anything starts; ok
// is false when there is no e-mail channel. httpAddr is --http, where the
// links of --try-mail point unless INTERLOCK_PUBLIC_URL says otherwise.
func (f mailFlags) config(log *zerolog.Logger, httpAddr string) (s mailSetup, ok bool, err error) {
	fromEnv := os.Getenv(mail.EnvHost) != ""
	if *f.try {
		if *f.file != "" || fromEnv {
			return s, false, usagef("--try-mail mails to a test server that sends nothing: leave out --smtp-config (and INTERLOCK_SMTP_HOST) to try, or --try-mail to send")
		}
		s.publicURL = os.Getenv(mail.EnvPublicURL)
		if s.publicURL == "" {
			if httpAddr == "" {
				return s, false, usagef("--try-mail links to the decision page of the HTTP API, which --http \"\" turns off: give --http, or set INTERLOCK_PUBLIC_URL")
			}
			host, port, err := net.SplitHostPort(httpAddr)
			if err != nil {
				return s, false, usagef("--http %q: %v", httpAddr, err)
			}
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			s.publicURL = "http://" + net.JoinHostPort(host, port)
		}
		s.try, s.cfg.Logger = true, log
		return s, true, nil
	}
	if *f.file == "" && !fromEnv {
		return s, false, nil
	}
	s.cfg, err = mail.LoadConfig(*f.file, os.Getenv)
	if err != nil {
		return s, false, usagef("--smtp-config: %s", strings.TrimPrefix(err.Error(), "mail: "))
	}
	s.cfg.Logger = log
	return s, true, nil
}

// startMail starts the e-mail channel on svc, stopped with it, and says
// where it mails.
func startMail(ctx context.Context, svc *interlock.Service, s mailSetup, stdout io.Writer) error {
	cfg := s.cfg
	if s.try {
		ts, err := mail.StartTryServer(stdout)
		if err != nil {
			return err
		}
		// Attached first, so that it stops after the mailer.
		if err := svc.Attach(ctx, closer{ts.Close}); err != nil {
			_ = ts.Close()
			return err
		}
		cfg = ts.Config(s.publicURL)
		cfg.Logger = s.cfg.Logger
	}
	cfg.Directory = (&bucketDirectory{js: svc.JetStream(), bucket: svc.Names().ConfigBucket(), log: cfg.Logger}).Current
	m, err := mail.New(svc, cfg)
	if err != nil {
		return err
	}
	if err := svc.Attach(ctx, m); err != nil {
		return err
	}
	if s.try {
		fmt.Fprintf(stdout, "Mail: trying it out: each mail is printed here with its link (to %s), and sent nowhere.\n", cfg.PublicURL)
		return nil
	}
	fmt.Fprintf(stdout, "Mail: sending through %s:%d (%s), links to %s.\n", cfg.Host, cfg.Port, cfg.TLS, cfg.PublicURL)
	return nil
}

// closer is a started service that stops with a close.
type closer struct{ close func() error }

func (closer) Start(context.Context) error  { return nil }
func (c closer) Stop(context.Context) error { return c.close() }

// directoryTTL is how long the directory read from the bucket is used
// before it is read again.
const directoryTTL = 5 * time.Second

// bucketDirectory is the directory of people kept in the configuration
// bucket (key people.Key), read again every directoryTTL. A value that
// does not parse is refused (and logged) while the previous one stays.
type bucketDirectory struct {
	js     jetstream.JetStream
	bucket string
	log    *zerolog.Logger

	mu   sync.Mutex
	dir  *people.Directory
	read time.Time
}

// Current is the directory now.
func (b *bucketDirectory) Current() *people.Directory {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != nil && time.Since(b.read) < directoryTTL {
		return b.dir
	}
	if b.dir == nil {
		b.dir = people.Empty()
	}
	b.read = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := b.js.KeyValue(ctx, b.bucket)
	if err != nil {
		b.log.Warn().Err(err).Str("bucket", b.bucket).Msg("mail: reading the directory of people")
		return b.dir
	}
	e, err := kv.Get(ctx, people.Key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		b.dir = people.Empty()
	case err != nil:
		b.log.Warn().Err(err).Str("bucket", b.bucket).Msg("mail: reading the directory of people")
	default:
		d, err := people.Parse(e.Value(), "kv "+b.bucket+" "+people.Key)
		if err != nil {
			b.log.Error().Err(err).Msg("mail: the directory of people does not parse; the previous one stays")
			return b.dir
		}
		b.dir = d
	}
	return b.dir
}
