package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/teams"
)

// startTeams starts the Microsoft Teams channel on svc, stopped with it:
// the interrupts of each role whose directory entry names a Teams
// Workflows URL are posted there, with a button to publicURL's inbox.
func startTeams(ctx context.Context, svc *interlock.Service, dir func() *people.Directory, publicURL string, log *zerolog.Logger) error {
	t, err := teams.New(svc, teams.Config{Directory: dir, PublicURL: publicURL, Logger: log})
	if err != nil {
		return err
	}
	// Like the directory, the channel starts whatever Ctrl-C does
	// mid-start: serve then stops it with the rest.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelStartTimeout)
	defer cancel()
	return svc.Attach(ctx, t)
}

// channelStartTimeout bounds binding a channel's consumers as serve
// starts (Teams, Web Push, webhooks, the asks' callbacks, the A2A
// follower): as long as provisioning waits for a forming cluster, and a
// moment more, for a node restarted while its peers still elect leaders
// waits as long (bus.Ensure); a shorter bound ended serve there.
const channelStartTimeout = bus.DefaultClusterWait + 15*time.Second
