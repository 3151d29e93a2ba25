package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// askSynopsis says how to run the ask command.
const askSynopsis = `ask question <text> [--field NAME] [--schema JSON]
       interlock ask choice <text> <id>=<label> ... [--multiple]
       interlock ask approval <action> [arg=value ...] --role ROLE [--args-schema JSON]
       interlock ask --file ASK.json
       interlock ask status <askId>`

// askCmd runs `interlock ask`: it puts one interrupt of the caller's
// design in front of people (PROTOCOL.md §8) and waits for the answer.
func askCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		id, agent, title, description, timeout, field, schema, argsSchema, role, file, inboxURL string
		multiple                                                                                bool
		assignees, reminders                                                                    listFlag
	)
	cf, c, pos, closeFn, err := clientCommand(ctx, "ask", askSynopsis, stderr, args, 0,
		func(fs *flag.FlagSet) {
			fs.StringVar(&id, "id", "", "the ask's `askId` (default: a fresh one); ask again with the same id to get the answer later")
			fs.StringVar(&agent, "agent", "", "`name` of who asks (an approval's requester)")
			fs.StringVar(&title, "title", "", "one `line` saying what is asked")
			fs.StringVar(&description, "description", "", "Markdown `text` saying more")
			fs.StringVar(&timeout, "timeout", "", "how long the ask may wait, a Go `duration` such as 4h; then it expires")
			fs.StringVar(&field, "field", "answer", "question: the `name` the answer is given under")
			fs.StringVar(&schema, "schema", "", "question: a JSON `Schema` the answer must fit")
			fs.BoolVar(&multiple, "multiple", false, "choice: several options may be picked")
			fs.StringVar(&role, "role", "", "approval: the approver `role` who decides")
			fs.StringVar(&argsSchema, "args-schema", "", "approval: a JSON `Schema` of the args")
			fs.Var(&assignees, "assignee", "approval: a `person` named to decide (repeat for more)")
			fs.Var(&reminders, "remind", "approval: remind this Go `duration` before the deadline (repeat for more)")
			fs.StringVar(&file, "file", "", "read the whole ask, as JSON (docs/schema/ask-requested.json), from `file` (- for stdin)")
			fs.StringVar(&inboxURL, "inbox", envOr("INTERLOCK_PUBLIC_URL", "http://127.0.0.1:8080"), "the inbox's `url`, for the link to the ask printed while it waits (default: $INTERLOCK_PUBLIC_URL, else http://127.0.0.1:8080)")
		}, nil)
	if err != nil {
		return helpOK(err)
	}
	defer closeFn()
	if len(pos) == 2 && pos[0] == "status" {
		ans, err := c.WaitAsk(ctx, pos[1], cf.wait)
		if err != nil {
			return err
		}
		return reportAsk(stdout, cf.json, pos[1], ans)
	}
	var req protocol.AskRequest
	switch {
	case file != "":
		if len(pos) > 0 {
			return usageOf("ask", "--file holds the whole ask; give no %s", quoteAll(pos))
		}
		var b []byte
		if file == "-" {
			b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		} else {
			b, err = os.ReadFile(file)
		}
		if err != nil {
			return fmt.Errorf("reading --file: %w", err)
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return usageOf("ask", "--file %s is not an ask in JSON: %v (see interlock schema ask-requested)", file, err)
		}
	case len(pos) < 2:
		return usageOf("ask", "ask needs a kind and its text: interlock %s", askSynopsis)
	default:
		in := protocol.AskInterrupt{Kind: pos[0], Title: title, Description: description, Timeout: timeout}
		v, ok := kindViews[pos[0]]
		if !ok {
			return usageOf("ask", "unknown kind %q: interlock %s", pos[0], askSynopsis)
		}
		f := askFlags{field: field, schema: schema, multiple: multiple, role: role, argsSchema: argsSchema, assignees: assignees, reminders: reminders}
		if err := v.ask(&in, pos[1:], f); err != nil {
			return err
		}
		req = protocol.AskRequest{Interrupt: in}
	}
	if id != "" {
		req.AskID = id
	}
	if agent != "" {
		req.Agent = agent
	}
	if req.AskID == "" {
		req.AskID = "ask-" + randomHex(8)
	}
	// Once the ask waits, say where it is before waiting for its answer.
	start := time.Now()
	ans, err := c.AskNoWait(ctx, req, cf.wait)
	if err != nil {
		return err
	}
	id = req.AskID
	if ans.Pending != nil {
		id = ans.Pending.Run
		fmt.Fprintf(stderr, "Asked %s: answer it in the inbox, %s/runs/ask/%s; waiting up to %s (read the answer later with: interlock ask status %s)\n",
			id, strings.TrimRight(inboxURL, "/"), url.PathEscape(id), cf.wait, id)
		if left := cf.wait - time.Since(start); left > 0 {
			if ans, err = c.WaitAsk(ctx, id, left); err != nil {
				return err
			}
		}
	} else if ans.Answered != nil {
		id = ans.Answered.AskID
	}
	return reportAsk(stdout, cf.json, id, ans)
}

// reportAsk prints what became of an ask, and exits as it says: 0
// answered, 4 still waiting, 3 expired or cancelled.
func reportAsk(w io.Writer, asJSON bool, id string, ans client.AskAnswer) error {
	if asJSON {
		if err := writeJSON(w, ans); err != nil {
			return err
		}
	} else if a := ans.Answered; a != nil {
		fmt.Fprintf(w, "Ask %s: %s", a.AskID, a.Status)
		if a.Approver != "" {
			fmt.Fprintf(w, " by %s", a.Approver)
		}
		fmt.Fprintln(w)
		switch {
		case len(a.Answers) > 0:
			b, _ := json.Marshal(a.Answers)
			fmt.Fprintf(w, "  answers %s\n", b)
		case len(a.Selected) > 0:
			fmt.Fprintf(w, "  selected %s\n", strings.Join(a.Selected, ", "))
		case a.Decision != "":
			fmt.Fprintf(w, "  decision %s", a.Decision)
			if a.Reason != "" {
				fmt.Fprintf(w, ": %s", a.Reason)
			}
			fmt.Fprintln(w)
			if len(a.Args) > 0 {
				fmt.Fprintf(w, "  args %s\n", a.Args)
			}
			if a.Message != "" {
				fmt.Fprintf(w, "  message %s\n", a.Message)
			}
		}
	} else if ans.Pending != nil {
		fmt.Fprintf(w, "Waiting: ask %s has no answer yet.\n", id)
		printInterrupt(w, client.AskFlow, *ans.Pending)
		fmt.Fprintf(w, "Read the answer later with: interlock ask status %s\n", id)
	}
	switch {
	case ans.Answered != nil && ans.Answered.Status == protocol.AskAnswered:
		return nil
	case ans.Answered != nil:
		return reported(exitRefused)
	}
	return reported(exitReasked)
}

// askFlags are the flags of `interlock ask` that shape one kind's
// interrupt.
type askFlags struct {
	field, schema        string
	multiple             bool
	role, argsSchema     string
	assignees, reminders []string
}

// rawFlag is the JSON a flag gives, or nil when it is not given.
func rawFlag(flag, s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, usageOf("ask", "--%s must be JSON, such as {\"type\":\"string\",\"minLength\":10}", flag)
	}
	return json.RawMessage(s), nil
}

// questionAsk makes a question ask of its text: one question, answered
// under --field.
func questionAsk(in *protocol.AskInterrupt, args []string, f askFlags) error {
	if len(args) > 1 {
		return usageOf("ask", "ask question takes one text, but was also given %s; quote the question", quoteAll(args[1:]))
	}
	s, err := rawFlag("schema", f.schema)
	if err != nil {
		return err
	}
	in.Questions = []protocol.Question{{Field: f.field, Question: args[0], Schema: s}}
	return nil
}

// choiceAsk makes a choice ask of its question and its id=label options.
func choiceAsk(in *protocol.AskInterrupt, args []string, f askFlags) error {
	in.Question, in.Multiple = args[0], f.multiple
	for _, o := range args[1:] {
		k, label, ok := strings.Cut(o, "=")
		if !ok || k == "" {
			return usageOf("ask", "option %q: write each option as id=label, such as pro=\"Pro plan\"", o)
		}
		in.Options = append(in.Options, protocol.Option{ID: k, Label: label})
	}
	return nil
}

// approvalAsk makes an approval ask of its action and its arg=value
// args.
func approvalAsk(in *protocol.AskInterrupt, args []string, f askFlags) error {
	a, err := toolArgs(args[1:])
	if err != nil {
		return err
	}
	if in.Args, err = json.Marshal(a); err != nil {
		return err
	}
	if in.ArgsSchema, err = rawFlag("args-schema", f.argsSchema); err != nil {
		return err
	}
	in.Action, in.ApproverRole, in.Assignees, in.Reminders = args[0], f.role, f.assignees, f.reminders
	return nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
