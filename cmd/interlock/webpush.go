package main

import (
	"context"
	"sync/atomic"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/webpush"
)

// pushDevices is the Web Push channel once it runs, for the inbox: a
// person signed in subscribes their browser to it.
type pushDevices struct {
	ch atomic.Pointer[webpush.Channel]
}

// devices returns the channel's devices, nil until it runs.
func (p *pushDevices) devices() *webpush.Devices {
	if ch := p.ch.Load(); ch != nil {
		return ch.Devices()
	}
	return nil
}

// startWebPush starts the Web Push channel on svc, stopped with it: the
// approvals that wait on a person reach the devices they subscribed in
// the inbox at publicURL.
func startWebPush(ctx context.Context, svc *interlock.Service, dir func() *people.Directory, publicURL string, p *pushDevices, log *zerolog.Logger) error {
	ch, err := webpush.New(svc, webpush.Config{Directory: dir, PublicURL: publicURL, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelStartTimeout)
	defer cancel()
	if err := svc.Attach(ctx, ch); err != nil {
		return err
	}
	p.ch.Store(ch)
	return nil
}
