package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

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
		file: fs.String("smtp-config", envOr(mail.EnvConfig, ""), "YAML `file` of the e-mail channel (see docs/channels.md): SMTP host, port, tls, username, from, publicURL; the password comes from the file or variable it names, or INTERLOCK_SMTP_PASSWORD; INTERLOCK_SMTP_* variables override it, and configure mail without a file"),
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
// is false when there is no e-mail channel. publicURL is --public-url
// (INTERLOCK_PUBLIC_URL), where links point, which the file's publicURL
// overrides; without either, the links of --try-mail point at httpAddr,
// --http.
func (f mailFlags) config(log *zerolog.Logger, httpAddr, publicURL string) (s mailSetup, ok bool, err error) {
	fromEnv := os.Getenv(mail.EnvHost) != ""
	if *f.try {
		if *f.file != "" || fromEnv {
			return s, false, usagef("--try-mail mails to a test server that sends nothing: leave out --smtp-config (and INTERLOCK_SMTP_HOST) to try, or --try-mail to send")
		}
		s.publicURL = publicURLOf(publicURL, httpAddr)
		if s.publicURL == "" {
			return s, false, usagef("--try-mail links to the decision page of the HTTP API, which --http \"\" turns off: give --http, or set INTERLOCK_PUBLIC_URL")
		}
		s.try, s.cfg.Logger = true, log
		return s, true, nil
	}
	if *f.file == "" && !fromEnv {
		return s, false, nil
	}
	getenv := func(k string) string {
		if k == mail.EnvPublicURL && publicURL != "" {
			return publicURL
		}
		return os.Getenv(k)
	}
	s.cfg, err = mail.LoadConfig(*f.file, getenv)
	if err != nil {
		return s, false, usagef("--smtp-config: %s", strings.TrimPrefix(err.Error(), "mail: "))
	}
	s.cfg.Logger = log
	return s, true, nil
}

// startMail starts the e-mail channel on svc, stopped with it, and says
// where it mails; dir is the directory of people it mails.
func startMail(ctx context.Context, svc *interlock.Service, s mailSetup, dir func() *people.Directory, stdout io.Writer) error {
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
	cfg.Directory = dir
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
