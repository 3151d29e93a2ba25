package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// gateCmd runs `interlock gate request TOOL key=value...`: it asks the
// tool-call gate whether a call may run, and waits for the decision.
func gateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var callID, agent, conversation, gctx string
	cf, c, pos, closeFn, err := clientCommand(ctx, "gate", "gate request <tool> [arg=value ...] [--call ID] [--agent NAME]", stderr, args, 2,
		func(fs *flag.FlagSet) {
			fs.StringVar(&callID, "call", "", "call `id` (default: a fresh one); ask again with the same id to get the decision later")
			fs.StringVar(&agent, "agent", "", "`name` of the agent asking, for the rules and the approver")
			fs.StringVar(&conversation, "conversation", "", "conversation `id`, for the rules and the approver")
			fs.StringVar(&gctx, "call-context", "", "JSON `object` the rules may read as context")
		},
		func(pos []string) error {
			if pos[0] != "request" {
				return usagef("unknown gate command %q; use: interlock gate request <tool> [arg=value ...]", pos[0])
			}
			if gctx != "" && !json.Valid([]byte(gctx)) {
				return usagef("--call-context must be a JSON object")
			}
			_, err := toolArgs(pos[2:])
			return err
		})
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	tool := pos[1]
	args2, _ := toolArgs(pos[2:])
	req := protocol.ToolRequest{CallID: callID, Tool: tool, Args: args2, Agent: agent, ConversationID: conversation}
	if gctx != "" {
		req.Context = json.RawMessage(gctx)
	}
	ans, err := c.RequestTool(ctx, req, cf.wait)
	if err != nil {
		return err
	}
	if cf.json {
		if err := writeJSON(stdout, ans); err != nil {
			return err
		}
	} else {
		printToolAnswer(stdout, ans)
	}
	switch {
	case ans.May():
		return nil
	case ans.Pending != nil:
		return reported(exitReasked)
	}
	return reported(exitRefused)
}

func printToolAnswer(w io.Writer, ans client.ToolAnswer) {
	if d := ans.Decided; d != nil {
		fmt.Fprintf(w, "%s: call %s of %s", strings.ToUpper(d.Decision[:1])+d.Decision[1:], d.CallID, d.Tool)
		if d.Rule != "" {
			fmt.Fprintf(w, " (rule %s)", d.Rule)
		}
		fmt.Fprintln(w)
		if d.Approver != "" {
			fmt.Fprintf(w, "  by %s", d.Approver)
			if d.Reason != "" {
				fmt.Fprintf(w, ": %s", d.Reason)
			}
			fmt.Fprintln(w)
		} else if d.Reason != "" {
			fmt.Fprintf(w, "  %s\n", d.Reason)
		}
		if len(d.Args) > 0 {
			fmt.Fprintf(w, "  run it with args %s\n", d.Args)
		}
		return
	}
	in := ans.Pending
	fmt.Fprintf(w, "Waiting: call %s needs approval; no decision yet.\n", in.Run)
	printInterrupt(w, client.GateFlow, *in)
	fmt.Fprintf(w, "Ask again later with: interlock gate request %s --call %s\n", in.Action, in.Run)
}

// toolArgs turns arg=value arguments into a call's args, by the one rule
// of field=value (see [protocol.Value]): the types of a tool's args are
// not known, so a value that is JSON (amount=400, ok=true) is sent as
// that JSON, any other as a string (orderId=o-1); arg:=JSON is sent as
// is.
func toolArgs(args []string) (map[string]json.RawMessage, error) {
	as, err := parseAssignments("argument", args)
	if err != nil {
		return nil, err
	}
	return values("argument", as, unknownTypes)
}
