package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/slackbridge"
)

// slackFlags are serve's flags of the Slack bridge.
type slackFlags struct {
	file *string
}

func addSlackFlags(fs *flag.FlagSet) slackFlags {
	return slackFlags{
		file: fs.String("slack-config", envOr("INTERLOCK_SLACK_CONFIG", ""), "YAML `file` of the Slack bridge (see docs/slack.md): role channels, Slack users and their roles; the bot token and signing secret come from the files or variables it names (by default SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET); without it there is no Slack bridge"),
	}
}

// config reads the bridge's configuration, before anything starts; ok is
// false when there is no bridge.
func (f slackFlags) config(log *zerolog.Logger) (cfg slackbridge.Config, ok bool, err error) {
	if *f.file == "" {
		return cfg, false, nil
	}
	cfg, err = slackbridge.LoadConfig(*f.file)
	if err != nil {
		return cfg, false, usagef("--slack-config: %s", strings.TrimPrefix(err.Error(), "slackbridge: "))
	}
	cfg.Logger = log
	return cfg, true, nil
}

// startSlack starts the Slack bridge on svc, stopped with it, and says
// where Slack's interactivity requests go.
func startSlack(ctx context.Context, svc *interlock.Service, cfg slackbridge.Config, stdout io.Writer) error {
	b, err := slackbridge.New(svc, cfg)
	if err != nil {
		return err
	}
	if err := svc.Attach(ctx, b); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Slack bridge: interactivity requests on http://%s (put it behind your HTTPS request URL).\n", b.Addr())
	return nil
}
