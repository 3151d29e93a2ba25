package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teamsStartTimeout)
	defer cancel()
	return svc.Attach(ctx, t)
}

// teamsStartTimeout bounds binding the channel's consumer.
const teamsStartTimeout = 30 * time.Second
