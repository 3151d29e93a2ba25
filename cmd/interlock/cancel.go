package main

import (
	"context"
	"flag"
	"io"
)

func cancelCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var reason string
	cf, c, pos, closeFn, err := clientCommand(ctx, "cancel", "cancel <flow> <run> [--reason TEXT]", stderr, args, 2, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why, for the audit record")
	}, checkFlowRun)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	ev, err := c.Cancel(ctx, pos[0], pos[1], reason)
	if err != nil {
		return err
	}
	return printOutcome(stdout, stderr, cf.json, pos[0], ev)
}
