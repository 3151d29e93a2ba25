package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errReported is returned when the command already said what went wrong.
var errReported = errors.New("reported")

const usage = `Interlock: durable interrupt-and-resume for agent flows and human approvals, on NATS JetStream.

Usage:
  interlock serve   [flags]                       run workers and the example flows
  interlock start   <flow> [field=value ...]      start a run
  interlock pending [--flow F]                    list runs waiting on an interrupt
  interlock show    <flow> <run>                  show a run's checkpoint
  interlock answer  <flow> <run> [field=value ...] [--select ID ...]
                                                  answer a run's pending interrupt
  interlock cancel  <flow> <run>                  cancel a waiting run
  interlock help    [command]                     show help

Values: field=value sends a string; field:=JSON sends any JSON (n:=3, ok:=true).
Run "interlock help <command>" for its flags.
`

// Run runs the interlock command with args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "start":
		return startCmd(ctx, rest, stdout, stderr)
	case "pending", "ls":
		return pendingCmd(ctx, rest, stdout, stderr)
	case "show":
		return showCmd(ctx, rest, stdout, stderr)
	case "answer", "resume":
		return answerCmd(ctx, rest, stdout, stderr)
	case "cancel":
		return cancelCmd(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		if len(rest) > 0 {
			return Run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", cmd)
}

// parse parses flags and positional arguments in any order.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: interlock %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
