//go:build unix

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// natsCLI is the natscli release the README installs.
const natsCLI = "github.com/nats-io/natscli/nats@v0.5.1"

// TestReadmeWalkWorksAsWritten replays the README's five-minute walk with
// the real `nats` CLI against a real service: its commands are read from
// README.md, run with --server pointing at the service, and their output
// checked. The `interlock answer` lines are sent with the client package,
// which the command is built on.
func TestReadmeWalkWorksAsWritten(t *testing.T) {
	t.Parallel()
	nats, err := exec.LookPath("nats")
	if err != nil {
		msg := "the nats CLI is not on PATH; install it with `go install " + natsCLI + "` and put $(go env GOPATH)/bin on PATH"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "go install "+natsCLI) {
		t.Errorf("README.md does not install the nats CLI with `go install %s`", natsCLI)
	}
	cmds := walkCommands(t, string(readme))

	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, examples.Flows()...)
	url := srv.ClientURL()
	w := &walk{t: t, nats: nats, url: url}
	nc, js := natstest.Connect(t, url)
	names, _ := wire.NewNames("")
	cl := client.New(nc, js, names, "/readme-test", natstest.Wait)

	// refundArgs are the refund's start state and its approval's args.
	type refundArgs struct {
		OrderID  string  `json:"orderId"`
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	var (
		interrupts  *proc // the step 1 subscriber
		refusals    *proc // the step 3 subscriber
		completions *proc // the step 7 subscriber
		// tokens holds the resume token each placeholder (TOKEN, ...)
		// stands for, once the walk has shown it.
		tokens = map[string]string{}
		pubs   int
		// The refund the walk starts, and the decision it sends.
		refundStart refundArgs
		decision    protocol.Resume
	)
	// nextInterrupt waits for the next interrupted event of run that the
	// subscriber shows.
	var cause string // the causationid of the last interrupt
	nextInterrupt := func(run string) protocol.Interrupted {
		t.Helper()
		var ev struct {
			Data        protocol.Interrupted
			Causationid string
		}
		interrupts.waitEvent("io.interlock.run.interrupted", run, &ev)
		cause = ev.Causationid
		return ev.Data
	}
	for _, args := range cmds {
		line := strings.Join(args, " ")
		switch {
		case len(args) == 3 && args[0] == "nats" && args[1] == "sub":
			p := w.start(args[1:]...)
			switch args[2] {
			case "interlock.ev.*.*.interrupted":
				interrupts = p
			case "interlock.ev.booking.r-42.refused":
				refusals = p
			case "interlock.ev.*.*.completed":
				completions = p
			default:
				t.Fatalf("the walk subscribes to %s; teach this test what it shows", args[2])
			}

		case args[0] == "nats" && args[1] == "pub":
			// The placeholders stand for tokens the subscriber showed.
			for _, m := range tokenPlaceholder.FindAllStringSubmatch(line, -1) {
				if tokens[m[1]] == "" {
					t.Fatalf("%s needs a token (%s) the walk has not shown yet", line, m[1])
				}
			}
			for i := range args {
				args[i] = tokenPlaceholder.ReplaceAllStringFunc(args[i], func(m string) string {
					return `"resumeToken":"` + tokens[tokenPlaceholder.FindStringSubmatch(m)[1]] + `"`
				})
			}
			var ce struct {
				Subject string
				Data    json.RawMessage
			}
			if err := json.Unmarshal([]byte(args[len(args)-1]), &ce); err != nil {
				t.Fatalf("README: %s does not publish a structured CloudEvent: %v", line, err)
			}
			run := ce.Subject
			w.run(args[1:]...)
			pubs++
			switch pubs {
			case 1: // start
				in := nextInterrupt(run)
				if in.Node != "ask_email" || in.Run != "r-42" || in.Checkpoint == 0 {
					t.Fatalf("after the start: %+v", in)
				}
				if want := `"causationid":"` + cause + `"`; cause != "start-r-42" || !strings.Contains(string(readme), want) {
					t.Fatalf("the first interrupt names its cause %q; the README shows the start's id, %s", cause, want)
				}
				tokens["TOKEN"] = in.ResumeToken
			case 2: // a bad email
				in := nextInterrupt(run)
				want := "ERROR: That doesn't look like an email. Politely reject generic domains like gmail.com."
				if in.Node != "ask_email" || len(in.Questions) != 1 || in.Questions[0].Context != want || !strings.Contains(string(readme), want) {
					t.Fatalf("after the bad email: %+v; the README promises %q", in, want)
				}
				tokens["NEW_TOKEN"] = in.ResumeToken
			case 3: // the old token again
				if refusals == nil {
					t.Fatal("the walk sends the old token before it subscribes to refusals")
				}
				got := refusals.waitLine(`"type":"io.interlock.resume.refused"`)
				if !strings.Contains(got, `"code":"token_mismatch"`) {
					t.Fatalf("the old token: %s", got)
				}
			case 4: // the good email
				in := nextInterrupt(run)
				if in.Node != "ask_contact" || strings.Join(in.Fields(), ",") != "phone" {
					t.Fatalf("after the good email: %s asking %v, want ask_contact asking only phone", in.Node, in.Fields())
				}
			case 5: // a refund large enough to need a supervisor
				var start struct{ State refundArgs }
				if err := json.Unmarshal(ce.Data, &start); err != nil || start.State.Amount <= refund.Threshold {
					t.Fatalf("README: the refund start %s, want an amount over %d: %v", ce.Data, refund.Threshold, err)
				}
				refundStart = start.State
				in := nextInterrupt(run)
				var args refundArgs
				if err := json.Unmarshal(in.Args, &args); err != nil || in.Flow != refund.Name || in.Node != "review" || in.Kind != "approval" ||
					in.Action != "issue_refund" || args != refundStart || in.ApproverRole != refund.SupervisorRole ||
					!slices.Contains(in.Decisions, "edit") {
					t.Fatalf("after the refund start: %+v, want the review approval of %+v", in, refundStart)
				}
				if want := `"action":"issue_refund","args":` + string(in.Args); !strings.Contains(string(readme), want) {
					t.Fatalf("the approval shows %s; the README does not", want)
				}
				if at, err := expiresAt(in); err != nil || time.Until(at) < 29*time.Minute || time.Until(at) > 31*time.Minute {
					t.Fatalf("the approval expires at %v, want in 30 minutes as the README says: %v", in.ExpiresAt, err)
				}
				tokens["APPROVAL_TOKEN"] = in.ResumeToken
			case 6: // the approval, edited
				if completions == nil {
					t.Fatal("the walk approves the refund before it subscribes to completions")
				}
				if err := json.Unmarshal(ce.Data, &decision); err != nil || decision.Decision != "edit" || decision.Approver == "" {
					t.Fatalf("README: the approval %s, want an edit with an approver: %v", ce.Data, err)
				}
				var ev struct{ Data protocol.Completed }
				completions.waitEvent("io.interlock.run.completed", run, &ev)
				var state struct {
					Outcome string          `json:"outcome"`
					Refund  json.RawMessage `json:"refund"`
				}
				var got refund.Refund
				if err := json.Unmarshal(ev.Data.State, &state); err != nil || json.Unmarshal(state.Refund, &got) != nil {
					t.Fatalf("the refund completed with state %s: %v", ev.Data.State, err)
				}
				var edited float64
				if err := json.Unmarshal(decision.Edits["amount"], &edited); err != nil {
					t.Fatalf("README: the approval edits %v, want an amount: %v", decision.Edits, err)
				}
				if state.Outcome != "refunded" || got.OrderID != refundStart.OrderID || got.Amount != edited || got.Amount == refundStart.Amount ||
					got.ApprovedBy != decision.Approver || !strings.HasPrefix(got.RefundID, "re_") {
					t.Fatalf("the refund completed with %s, want %s refunded %v approved by %s", ev.Data.State, refundStart.OrderID, edited, decision.Approver)
				}
				shown := `"outcome":"refunded","refund":` + strings.Replace(string(state.Refund), got.RefundID, "re_...", 1)
				if !strings.Contains(string(readme), shown) {
					t.Fatalf("the completed event shows %s; the README does not", shown)
				}
			default:
				t.Fatalf("the walk has a %dth `nats pub`; teach this test what it does", pubs)
			}

		case line == "nats kv get interlock_pending booking.r-42 --raw":
			out := w.run(args[1:]...)
			var p protocol.Pending
			if err := json.Unmarshal([]byte(out), &p); err != nil || p.Run != "r-42" || p.Flow != "booking" {
				t.Fatalf("%s printed %q: %v", line, out, err)
			}

		case line == "nats stream get INTERLOCK_EVENTS --last-for interlock.ev.booking.r-42.completed":
			if out := w.run(args[1:]...); !strings.Contains(out, "io.interlock.run.completed") || !strings.Contains(out, `"subject":"r-42"`) {
				t.Fatalf("%s printed %q", line, out)
			}

		case line == "go run ./cmd/interlock events booking r-42":
			// What the command prints, read as it reads it.
			evs, _, err := cl.RunEvents(t.Context(), "booking", "r-42", client.MaxPendingLimit)
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, ev := range evs {
				seen = append(seen, ev.Kind+" "+string(ev.Event.Data()))
			}
			for _, want := range []string{"started", "interrupted", "resumed", "token_mismatch", "completed"} {
				if !strings.Contains(strings.Join(seen, "\n"), want) {
					t.Fatalf("%s shows no %s among %d events", line, want, len(evs))
				}
			}

		case line == "go run ./cmd/interlock audit booking r-42":
			recs, err := cl.Audit(t.Context(), "booking", "r-42")
			if err != nil || len(recs) == 0 || recs[0].Action != "started" {
				t.Fatalf("%s: %d records, %v", line, len(recs), err)
			}

		case line == "go run ./cmd/interlock audit refund r-7 --json":
			recs, err := cl.Audit(t.Context(), "refund", "r-7")
			if err != nil {
				t.Fatal(err)
			}
			checkRefundAudit(t, string(readme), recs, decision)

		case line == "nats kv get interlock_runs booking.r-42 --raw":
			out := w.run(args[1:]...)
			var cp protocol.Checkpoint
			if err := json.Unmarshal([]byte(out), &cp); err != nil || cp.Status != protocol.StatusCompleted || cp.Run != "r-42" {
				t.Fatalf("%s printed %q: %v", line, out, err)
			}

		case len(args) > 5 && strings.Join(args[:5], " ") == "go run ./cmd/interlock answer booking":
			cliAnswer(t, cl, args[5], args[6:])

		case strings.HasPrefix(line, "go run ./cmd/interlock "):
			// Covered by cmd/interlock's tests.
		default:
			t.Fatalf("the walk runs %q; teach this test what it shows", line)
		}
	}
	if pubs != 6 || interrupts == nil || refusals == nil || completions == nil {
		t.Fatalf("the walk has %d `nats pub` commands and subscribers %v, %v, %v; want 6 (start, bad answer, old token, good answer, refund start, approval) and three",
			pubs, interrupts != nil, refusals != nil, completions != nil)
	}
	for _, run := range []string{"booking.r-42", "refund.r-7"} {
		flow, id, _ := strings.Cut(run, ".")
		cp, err := cl.Checkpoint(t.Context(), flow, id)
		if err != nil || cp.Status != protocol.StatusCompleted {
			t.Fatalf("at the end of the walk, %s: %+v, %v", run, cp, err)
		}
	}
}

// tokenPlaceholder is a resume token in a README command: TOKEN, NEW_TOKEN,
// APPROVAL_TOKEN.
var tokenPlaceholder = regexp.MustCompile(`"resumeToken":"([A-Z_]*TOKEN)"`)

// checkRefundAudit checks the refund's audit records as `interlock audit
// --json` prints them: started and edited, hash-chained and
// signed, the edit with the args before and after, as the README shows
// them.
func checkRefundAudit(t *testing.T, readme string, recs []protocol.AuditRecord, decision protocol.Resume) {
	t.Helper()
	var (
		actions []string
		prev    string
		edited  *protocol.AuditRecord
		out     []string
	)
	for _, r := range recs {
		out = append(out, string(r.Data))
		var rec protocol.AuditRecord
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			t.Fatalf("audit record %s: %v", r.Data, err)
		}
		hash, err := protocol.CanonicalHash(r.Data)
		if err != nil || rec.Seq != uint64(len(actions)+1) || rec.Prev != prev || rec.Hash != hash {
			t.Fatalf("audit record %d (seq %d, prev %q, hash %q) does not chain onto %q; its hash is %q: %v", len(actions)+1, rec.Seq, rec.Prev, rec.Hash, prev, hash, err)
		}
		prev = rec.Hash
		actions = append(actions, rec.Action)
		if rec.Action == "edited" {
			edited = &rec
		}
	}
	if strings.Join(actions, ",") != "started,edited" || edited == nil || edited.Approval == nil {
		t.Fatalf("the refund's audit records are %v, want started, edited:\n%s", actions, strings.Join(out, "\n"))
	}
	a := edited.Approval
	edits, _ := json.Marshal(decision.Edits)
	var before, after struct{ Amount float64 }
	var want float64
	if err := json.Unmarshal(a.Args, &before); err != nil || json.Unmarshal(a.Final, &after) != nil || json.Unmarshal(decision.Edits["amount"], &want) != nil ||
		edited.By != decision.Approver || edited.Reason != decision.Reason || string(a.Edits) != string(edits) ||
		after.Amount != want || before.Amount == after.Amount {
		t.Fatalf("the edited record: by %q, reason %q, args %s, edits %s, final %s; the approval sent %+v: %v", edited.By, edited.Reason, a.Args, a.Edits, a.Final, decision, err)
	}
	if edited.Kid == "" || edited.Sig == "" {
		t.Fatalf("the edited record is not signed: kid %q, sig %q", edited.Kid, edited.Sig)
	}
	ordinal := []string{"first", "second", "third", "fourth"}[edited.Seq-1]
	for _, want := range []string{`"action":"edited"`, `"by":"` + edited.By + `"`, `"args":` + string(a.Args), `"edits":` + string(a.Edits), `"final":` + string(a.Final),
		fmt.Sprintf(`"seq":%d,`, edited.Seq), "The " + ordinal + " record, `edited`", `"kid":"...","sig":"..."`} {
		if !strings.Contains(readme, want) {
			t.Fatalf("the edited record shows %s; the README does not", want)
		}
	}
}

// cliAnswer sends what `interlock answer booking <run> args...` sends.
func cliAnswer(t *testing.T, cl *client.Client, run string, args []string) {
	t.Helper()
	r := protocol.Resume{Answers: map[string]json.RawMessage{}}
	for i := 0; i < len(args); i++ {
		if args[i] == "--select" && i+1 < len(args) {
			r.Selected = append(r.Selected, args[i+1])
			i++
			continue
		}
		k, v, ok := strings.Cut(args[i], "=")
		if !ok {
			t.Fatalf("README: interlock answer argument %q is not field=value", args[i])
		}
		b, _ := json.Marshal(v)
		r.Answers[k] = b
	}
	in, err := cl.LastInterrupt(t.Context(), "booking", run)
	if err != nil {
		t.Fatal(err)
	}
	r.ResumeToken = in.ResumeToken
	ev, err := cl.Resume(t.Context(), "booking", run, r)
	if err != nil || ev.Kind != protocol.EventInterrupted && ev.Kind != protocol.EventCompleted {
		t.Fatalf("README: interlock answer booking %s %v: %q, %v", run, args, ev.Kind, err)
	}
}

// walkCommands returns the shell commands of the README's five-minute
// walk, split into words as a shell would.
func walkCommands(t *testing.T, readme string) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "## Five minutes")
	if !ok {
		t.Fatal(`README.md has no "## Five minutes" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cmds [][]string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			words, err := shellWords(line)
			if err != nil {
				t.Fatalf("README: %q: %v", line, err)
			}
			cmds = append(cmds, words)
		}
	}
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in the README walk", len(cmds))
	}
	return cmds
}

// shellWords splits a command line into words: blanks separate words,
// single quotes keep everything, double quotes keep all but \" and \\.
func shellWords(line string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		case '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed '")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			in = true
		case '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				word.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, fmt.Errorf("unclosed \"")
			}
			in = true
		default:
			word.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words, nil
}

// walk runs the nats CLI against one server.
type walk struct {
	t    *testing.T
	nats string
	url  string
}

func (w *walk) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, w.nats, append([]string{"--server", w.url}, args...)...)
	// Keep the user's natscli settings out of it.
	cmd.Env = append(os.Environ(), "NATS_CONTEXT=", "NATS_URL=", "XDG_CONFIG_HOME="+w.t.TempDir(), "HOME="+w.t.TempDir())
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs a command to its end and returns its stdout.
func (w *walk) run(args ...string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), natstest.Wait)
	defer cancel()
	cmd := w.command(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("nats %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// linesOrPrompt splits output into lines, and also ends one at a pager's
// prompt, which waits for an answer without a newline.
func linesOrPrompt(data []byte, atEOF bool) (int, []byte, error) {
	const prompt = "Next Page?"
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return bufio.ScanLines(data, atEOF)
	}
	if i := bytes.Index(data, []byte(prompt)); i >= 0 {
		return i + len(prompt), data[:i+len(prompt)], nil
	}
	return bufio.ScanLines(data, atEOF)
}

// proc is a command running in the background whose output is collected
// line by line.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []string
	seen int // lines already matched by waitLine
	more chan struct{}
	done chan struct{}
}

// start starts a long-running nats command, such as nats sub, and waits
// until it says it is subscribed.
func (w *walk) start(args ...string) *proc {
	w.t.Helper()
	p := w.startCmd(w.command(context.WithoutCancel(w.t.Context()), args...))
	p.waitAny("Subscribing on")
	return p
}

func (w *walk) startCmd(cmd *exec.Cmd) *proc {
	w.t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw // nats sub says "Subscribing on" on stderr
	p := &proc{t: w.t, cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("starting %v: %v", cmd.Args, err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sc.Split(linesOrPrompt)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
	}()
	w.t.Cleanup(p.stop)
	return p
}

// stop ends the command and its children, and waits for its output.
func (p *proc) stop() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// waitEvent waits for the next CloudEvent of type typ about run that the
// command prints, and decodes it into v.
func (p *proc) waitEvent(typ, run string, v any) {
	p.t.Helper()
	line := p.wait(func(line string) bool {
		return strings.Contains(line, `"type":"`+typ+`"`) && strings.Contains(line, `"subject":"`+run+`"`)
	}, true)
	if err := json.Unmarshal([]byte(line), v); err != nil {
		p.t.Fatalf("%v printed %q: %v", p.cmd.Args, line, err)
	}
}

// waitAny waits until a line holds one of subs.
func (p *proc) waitAny(subs ...string) {
	p.t.Helper()
	p.wait(func(line string) bool {
		for _, s := range subs {
			if strings.Contains(line, s) {
				return true
			}
		}
		return false
	}, false)
}

// waitLine waits for the next line, after those it returned before, that
// holds sub, and returns it.
func (p *proc) waitLine(sub string) string {
	p.t.Helper()
	return p.wait(func(line string) bool { return strings.Contains(line, sub) }, true)
}

func (p *proc) wait(ok func(string) bool, consume bool) string {
	p.t.Helper()
	deadline := time.NewTimer(natstest.Wait)
	defer deadline.Stop()
	ended := false
	for {
		p.mu.Lock()
		for i := p.seen; i < len(p.out); i++ {
			if ok(p.out[i]) {
				if consume {
					p.seen = i + 1
				}
				line := p.out[i]
				p.mu.Unlock()
				return line
			}
		}
		p.mu.Unlock()
		if ended {
			p.t.Fatalf("%v ended; it printed:\n%s", p.cmd.Args, p.output())
		}
		select {
		case <-p.more:
		case <-p.done:
			ended = true // look at the last lines once more
		case <-deadline.C:
			p.t.Fatalf("waited %s on %v; it printed:\n%s", natstest.Wait, p.cmd.Args, p.output())
		}
	}
}
