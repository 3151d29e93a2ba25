package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/interlockhq/interlock/protocol"
)

// kindView is how the inbox shows one kind of interrupt and reads its
// form: the inbox's template of the kind, with its parts of
// templates/kinds.html ("ask-<kind>", the card's form, and
// "asks-<kind>", the queue's line). Checking the answer is the kind's
// [protocol.Spec]; every kind of [protocol.Kinds] has a view
// (TestEveryInterruptKindHasAView).
type kindView struct {
	// summary says in the run's history what an interrupted event asks.
	summary func(d protocol.Interrupted) string
	// prepare fills the card's view of a pending interrupt.
	prepare func(iv *interruptView)
	// read reads the posted form into res, noting in iv.Errors what is
	// missing; it returns what was sent: "answer" or "decision".
	read func(r *http.Request, iv *interruptView, res *protocol.Resume) string
	// field is the form field a refusal of res is shown beside.
	field func(res protocol.Resume) string
}

// kindViews are the views of the kinds.
var kindViews = map[string]kindView{
	protocol.KindQuestion: {summary: questionSummary, prepare: func(*interruptView) {}, read: readQuestion, field: func(protocol.Resume) string { return "" }},
	protocol.KindChoice:   {summary: choiceSummary, prepare: func(*interruptView) {}, read: readChoice, field: func(protocol.Resume) string { return "selected" }},
	protocol.KindApproval: {summary: approvalSummary, prepare: prepareApproval, read: readApproval, field: approvalField},
}

// viewOf returns the view of an interrupt kind, and for a kind this
// version does not know, one that shows its name and reads no form.
func viewOf(kind string) kindView {
	if v, ok := kindViews[kind]; ok {
		return v
	}
	return kindView{
		summary: func(d protocol.Interrupted) string { return "asks (a " + d.Kind + " interrupt)" },
		prepare: func(*interruptView) {},
		read: func(_ *http.Request, iv *interruptView, _ *protocol.Resume) string {
			iv.Errors[""] = "This inbox cannot answer this kind of request."
			return "answer"
		},
		field: func(protocol.Resume) string { return "" },
	}
}

func questionSummary(d protocol.Interrupted) string {
	qs := make([]string, 0, len(d.Questions))
	for _, q := range d.Questions {
		qs = append(qs, q.Question)
	}
	return "asks: " + strings.Join(qs, " ")
}

// readQuestion reads each answer by the one rule of typed text
// ([protocol.Value]), by its question's type.
func readQuestion(r *http.Request, iv *interruptView, res *protocol.Resume) string {
	res.Answers = map[string]json.RawMessage{}
	for _, q := range iv.Questions {
		name := "answer." + q.Field
		a := strings.TrimSpace(r.PostFormValue(name))
		iv.Values[name] = a
		if a == "" {
			iv.Errors[name] = "Please answer this question."
			continue
		}
		v, err := protocol.Value(a, q.Type)
		if err != nil {
			iv.Errors[name] = "The answer " + err.Error() + "."
			continue
		}
		res.Answers[q.Field] = v
	}
	return "answer"
}

func choiceSummary(d protocol.Interrupted) string { return "asks: " + d.Question }

func readChoice(r *http.Request, iv *interruptView, res *protocol.Resume) string {
	res.Selected = r.PostForm["selected"]
	if len(res.Selected) == 0 {
		iv.Errors["selected"] = "Pick an option."
	}
	return "answer"
}

func approvalSummary(d protocol.Interrupted) string {
	return fmt.Sprintf("asks %s to approve %s", d.ApproverRole, d.Action)
}

func prepareApproval(iv *interruptView) {
	iv.Allowed = iv.Decisions
	if len(iv.Allowed) == 0 {
		iv.Allowed = protocol.Verdicts()
	}
	if iv.ArgsJSON == "" {
		iv.ArgsJSON = indent(iv.Args)
	}
	_ = json.Unmarshal(iv.Args, &iv.Proposal)
}

func readApproval(r *http.Request, iv *interruptView, res *protocol.Resume) string {
	res.Decision = r.PostFormValue("decision")
	res.Reason = strings.TrimSpace(r.PostFormValue("reason"))
	iv.Values["decision"] = res.Decision
	switch protocol.Verdict(res.Decision) {
	case protocol.VerdictApprove:
	case protocol.VerdictEdit:
		args := r.PostFormValue("args")
		iv.ArgsJSON = args
		edits, msg := editsOf(iv.Args, args)
		if msg != "" {
			iv.Errors["args"] = msg
		}
		res.Edits = edits
	case protocol.VerdictReject:
		if iv.RejectReasonRequired && res.Reason == "" {
			iv.Errors["reason.reject"] = "Say why you reject it: this approval takes a reason, which is recorded and sent back."
		}
	default:
		iv.Errors[""] = "Choose approve, edit or reject."
	}
	return "decision"
}

func approvalField(res protocol.Resume) string {
	if res.Decision == string(protocol.VerdictEdit) {
		return "args"
	}
	return "reason." + res.Decision
}

// kindPart returns the template function kind: {{kind "ask" .Kind $}}
// renders t's template ask-<kind> with the data given, or ask-unknown for
// a kind templates/kinds.html has no part for.
func kindPart(t *template.Template) func(part, kind string, data any) (template.HTML, error) {
	return func(part, kind string, data any) (template.HTML, error) {
		name := part + "-" + kind
		if t.Lookup(name) == nil {
			name = part + "-unknown"
		}
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, name, data); err != nil {
			return "", err
		}
		return template.HTML(b.String()), nil // the part, escaped by html/template
	}
}
