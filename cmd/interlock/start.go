package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
)

func startCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var run, state, origin string
	var as []assignment
	st := map[string]json.RawMessage{}
	cf, c, pos, closeFn, err := clientCommand(ctx, "start", "start <flow> [field=value ...] [--run ID] [--state JSON]", stderr, args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&run, "run", "", "run `id` (default: a fresh one)")
		fs.StringVar(&state, "state", "", "initial state as a JSON `object`; field=value arguments are added to it")
		fs.StringVar(&origin, "origin", "", "JSON `object` echoed in every event of the run")
	}, func(pos []string) error {
		if state != "" {
			if err := json.Unmarshal([]byte(state), &st); err != nil {
				return usagef("--state must be a JSON object: %v", err)
			}
		}
		var err error
		if as, err = parseAssignments("argument", pos[1:]); err != nil {
			return err
		}
		if origin != "" && !json.Valid([]byte(origin)) {
			return usagef("--origin must be a JSON object")
		}
		if err := checkName("flow", pos[0]); err != nil {
			return err
		}
		if run != "" {
			if err := checkName("run", run); err != nil {
				return usageError{msg: "--run: " + err.Error()}
			}
		}
		return nil
	})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	if len(as) > 0 {
		// The workers say the types of the flow's state fields; without
		// word from them, field=value infers.
		fi, _, _ := c.FlowInfo(ctx, pos[0])
		more, err := values("argument", as, func(f string) string { return fi.State[f] })
		if err != nil {
			return err
		}
		maps.Copy(st, more)
	}
	ev, err := c.Start(ctx, pos[0], run, st, json.RawMessage(origin))
	if err != nil {
		return err
	}
	err = printOutcome(stdout, stderr, cf.json, pos[0], ev)
	if len(as) > 0 && !cf.json {
		hintValueRule(stderr, ev)
	}
	return err
}
