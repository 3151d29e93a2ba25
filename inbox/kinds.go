package inbox

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
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
	what := d.Action
	if d.Title != "" {
		what = "“" + d.Title + "”"
	}
	if d.ApproverRole == "" {
		return "asks to approve " + what
	}
	return fmt.Sprintf("asks %s to approve %s", d.ApproverRole, what)
}

func prepareApproval(iv *interruptView) {
	iv.Allowed = iv.Decisions
	if len(iv.Allowed) == 0 {
		iv.Allowed = protocol.Verdicts()
	}
	iv.Heading = cmp.Or(iv.Title, iv.Action)
	iv.Proposes = true
	iv.ShowReason = iv.Reason != "" && !strings.Contains(words(iv.Description), words(iv.Reason))
	_ = json.Unmarshal(iv.Args, &iv.Proposal)
	// An edit refused by the schema names the argument's path.
	if msg := iv.Errors["args"]; strings.HasPrefix(msg, "/") {
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "/"), ":")
		name, _, _ = strings.Cut(name, "/")
		if _, ok := iv.Proposal[name]; ok && iv.Errors["arg."+name] == "" {
			iv.Errors["arg."+name] = msg
		}
	}
	iv.Fields = nil
	for _, a := range protocol.Args(iv.Args, iv.ArgsSchema) {
		f := argField{Arg: a, Name: "arg." + a.Name, ID: "arg-" + a.Name, Control: control(a), Input: a.Input(), Error: inWords(a.Name, a.Title, iv.Errors["arg."+a.Name])}
		if sent, ok := iv.Values[f.Name]; ok {
			f.Input = sent
		}
		switch f.Control {
		case "checkbox":
			f.Checked = f.Input == "true"
		case "json":
			if _, ok := iv.Values[f.Name]; !ok {
				f.Input = indent(a.Value)
			}
		case "number":
			f.Min, f.Max, f.Step = bound(a.Minimum, a.ExclusiveMinimum), bound(a.Maximum, a.ExclusiveMaximum), "any"
			switch {
			case a.MultipleOf != nil:
				f.Step = strconv.FormatFloat(*a.MultipleOf, 'f', -1, 64)
			case a.Type == protocol.JSONInteger:
				f.Step = "1"
			case a.Display == protocol.DisplayCurrency:
				f.Step = "0.01"
			}
		case "select":
			if _, ok := iv.Values[f.Name]; !ok {
				f.Input = compact(a.Value)
			}
		}
		iv.Fields = append(iv.Fields, f)
	}
	if iv.CheckpointInterrupt.Quorum != nil {
		iv.Tally = tally(iv.CheckpointInterrupt, iv.StartedBy)
	}
}

// bound is a number field's min or max: the schema's bound, or its
// exclusive one.
func bound(inclusive, exclusive *float64) string {
	switch {
	case inclusive != nil:
		return strconv.FormatFloat(*inclusive, 'f', -1, 64)
	case exclusive != nil:
		return strconv.FormatFloat(*exclusive, 'f', -1, 64)
	}
	return ""
}

// control is the kind of form field that edits an argument.
func control(a protocol.Arg) string {
	switch {
	case len(a.Enum) > 0:
		return "select"
	case a.Type == protocol.JSONBoolean:
		return "checkbox"
	case a.Type == protocol.JSONNumber || a.Type == protocol.JSONInteger:
		return "number"
	case a.Type == protocol.JSONObject || a.Type == protocol.JSONArray:
		return "json"
	case a.Type != protocol.JSONString && a.Type != "":
		return "json"
	}
	switch a.Display {
	case protocol.DisplayEmail:
		return "email"
	case protocol.DisplayURL:
		return "url"
	case protocol.DisplayMarkdown:
		return "textarea"
	}
	if (a.MaxLength != nil && *a.MaxLength > 200) || len(a.Input()) > 80 || strings.Contains(a.Input(), "\n") {
		return "textarea"
	}
	return "text"
}

// tally says where an approval's quorum stands, and who may still vote:
// with separation of duties, not the requester, not startedBy (who
// started the run), and nobody twice.
func tally(in protocol.CheckpointInterrupt, startedBy string) *quorumView {
	q := in.Quorum
	t := &quorumView{Required: q.Total(), Votes: in.Votes}
	voters := []string{}
	per := map[string]int{}
	for _, v := range in.Votes {
		if !slices.Contains(voters, v.Approver) {
			voters = append(voters, v.Approver)
			per[v.Role]++
		}
	}
	t.Voters = len(voters)
	var need []string
	if len(q.Roles) > 0 {
		for _, rc := range q.Roles {
			if n := rc.Count - per[rc.Role]; n > 0 {
				need = append(need, fmt.Sprintf("%d more holding %s", n, rc.Role))
			}
		}
	} else if n := q.Required - t.Voters; n > 0 {
		who := []string{}
		if len(in.Assignees) > 0 {
			who = append(who, strings.Join(in.Assignees, ", "))
		}
		if in.ApproverRole != "" {
			who = append(who, "anyone holding "+in.ApproverRole)
		}
		s := fmt.Sprintf("%d more approver", n)
		if n > 1 {
			s += "s"
		}
		if len(who) > 0 {
			s += ": " + strings.Join(who, " or ")
		}
		need = append(need, s)
	}
	if len(need) == 0 {
		return t
	}
	t.Still = strings.Join(need, "; ")
	if in.SeparationOfDuties {
		var not []string
		for _, who := range append([]string{in.Requester, startedBy}, voters...) {
			if who != "" && !slices.Contains(not, who) {
				not = append(not, who)
			}
		}
		if len(not) > 0 {
			t.Still += " (not " + strings.Join(not, " or ") + ": each person votes once, and who asked for it or started it not at all)"
		}
	}
	return t
}

func readApproval(r *http.Request, iv *interruptView, res *protocol.Resume) string {
	res.Decision = r.PostFormValue("decision")
	res.Reason = strings.TrimSpace(r.PostFormValue("reason"))
	iv.Values["decision"] = res.Decision
	switch protocol.Verdict(res.Decision) {
	case protocol.VerdictApprove:
	case protocol.VerdictEdit:
		res.Edits = readEdits(r, iv)
	case protocol.VerdictReject:
		if iv.RejectReasonRequired && res.Reason == "" {
			iv.Errors["reason.reject"] = "Say why you reject it: this approval takes a reason, which is recorded and sent back."
		}
	case protocol.VerdictRespond:
		res.Reason = ""
		res.Message = strings.TrimSpace(r.PostFormValue("message"))
		iv.Values["message"] = res.Message
		if res.Message == "" {
			iv.Errors["message"] = "Write the message to send back."
		}
	default:
		iv.Errors[""] = "Choose approve, edit, reject or respond."
	}
	return "decision"
}

// readEdits reads the edit form's fields, one per argument, by each
// argument's type, and returns the arguments that differ from the
// proposal; what cannot be read is noted beside its field.
func readEdits(r *http.Request, iv *interruptView) map[string]json.RawMessage {
	edits := map[string]json.RawMessage{}
	for _, a := range protocol.Args(iv.Args, iv.ArgsSchema) {
		name := "arg." + a.Name
		text := r.PostFormValue(name)
		var v json.RawMessage
		var err error
		switch control(a) {
		case "checkbox":
			text = strconv.FormatBool(text != "")
			v = json.RawMessage(text)
		case "json", "select":
			text = strings.TrimSpace(text)
			if !json.Valid([]byte(text)) {
				err = errors.New("is not JSON, such as " + compact(a.Value))
			} else {
				v = json.RawMessage(text)
			}
		default:
			v, err = protocol.Value(text, a.Type)
		}
		iv.Values[name] = text
		if err != nil {
			iv.Errors[name] = a.Title + " " + strings.TrimPrefix(err.Error(), "protocol: ") + "."
			continue
		}
		if !protocol.SameJSON(v, a.Value) {
			edits[a.Name] = v
		}
	}
	for k := range iv.Errors {
		if strings.HasPrefix(k, "arg.") {
			iv.Errors["args"] = "Some arguments cannot be read: see beside each."
			return nil
		}
	}
	if len(edits) == 0 {
		iv.Errors["args"] = "Nothing was changed: change an argument, or approve as proposed."
		return nil
	}
	return edits
}

func approvalField(res protocol.Resume) string {
	switch protocol.Verdict(res.Decision) {
	case protocol.VerdictEdit:
		return "args"
	case protocol.VerdictRespond:
		return "message"
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

// inWords says a schema's refusal of argument name ("/amount: must be <=
// 10000", as the engine names the place by its JSON pointer) in words
// under the argument's title: "Amount must be at most 10000." Any other
// message is as it is.
func inWords(name, title, msg string) string {
	path, what, ok := strings.Cut(msg, ": ")
	rest, found := strings.CutPrefix(path, "/"+name)
	if !ok || !found || rest != "" && !strings.HasPrefix(rest, "/") || strings.Contains(what, "; ") {
		return msg
	}
	for _, r := range [][2]string{{"must be <= ", "must be at most "}, {"must be >= ", "must be at least "},
		{"must be < ", "must be less than "}, {"must be > ", "must be more than "}} {
		if strings.HasPrefix(what, r[0]) {
			what = r[1] + strings.TrimPrefix(what, r[0])
			break
		}
	}
	where := cmp.Or(title, name)
	if rest != "" {
		where += " (" + strings.ReplaceAll(strings.TrimPrefix(rest, "/"), "/", " › ") + ")"
	}
	return where + " " + strings.TrimSuffix(what, ".") + "."
}

// words is s lower-cased, its runs of spaces and Markdown emphasis as
// one space: what two texts are compared by.
func words(s string) string {
	s = strings.NewReplacer("*", "", "_", "", "`", "").Replace(strings.ToLower(s))
	return strings.Join(strings.Fields(s), " ")
}
