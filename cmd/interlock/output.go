package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printOutcome prints the event that settled a command. A refused outcome
// is an error with exit code 3, a failed one with exit code 1; both are
// printed here, on stdout as JSON with --json, else on stderr.
func printOutcome(stdout, stderr io.Writer, asJSON bool, flow string, ev client.Event) error {
	if asJSON {
		var v any
		b, _ := json.Marshal(ev.Event)
		_ = json.Unmarshal(b, &v)
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
		switch ev.Kind {
		case protocol.EventRefused:
			return reported(exitRefused)
		case protocol.EventFailed:
			return reported(exitFailed)
		}
		return nil
	}
	run := ev.Event.Subject()
	switch ev.Kind {
	case protocol.EventInterrupted:
		var in protocol.Interrupted
		if err := ev.Decode(&in); err != nil {
			return err
		}
		printInterrupt(stdout, flow, in)
	case protocol.EventCompleted:
		var done protocol.Completed
		if err := ev.Decode(&done); err != nil {
			return err
		}
		var state any
		_ = json.Unmarshal(done.State, &state)
		b, _ := json.MarshalIndent(state, "  ", "  ")
		fmt.Fprintf(stdout, "run %s of %s completed (checkpoint %d) with state:\n  %s\n", run, flow, done.Checkpoint, b)
	case protocol.EventFailed:
		var f protocol.Failed
		_ = ev.Decode(&f)
		fmt.Fprintf(stderr, "run %s of %s failed at node %s: %s\n", run, flow, f.Node, f.Error)
		return reported(exitFailed)
	case protocol.EventRefused:
		var ref protocol.Refused
		_ = ev.Decode(&ref)
		fmt.Fprintf(stderr, "refused (%s): %s\n", ref.Code, ref.Message)
		return reported(exitRefused)
	default:
		fmt.Fprintf(stdout, "run %s of %s: %s\n", run, flow, ev.Kind)
	}
	return nil
}

// deadline shows a deadline in local time with the time left.
func deadline(at, now time.Time) string {
	left := at.Sub(now).Round(time.Second)
	if left < 0 {
		return fmt.Sprintf("%s (passed %s ago)", at.Local().Format(time.DateTime), -left)
	}
	return fmt.Sprintf("%s (%s left)", at.Local().Format(time.DateTime), left)
}

// indentJSON pretty-prints a JSON value, each line after the first
// starting with prefix.
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, prefix, "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// compactJSON prints a JSON value on one line.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
