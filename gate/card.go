package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// Limits of what a rule shows the approver.
const (
	// MaxTitle is the longest title a call shows, in bytes, once filled;
	// a longer one is cut with "…".
	MaxTitle = 200
	// MaxDescription is the longest description a call shows, in bytes,
	// once filled; a longer one is cut with "…".
	MaxDescription = 16 << 10
	// maxValue is the longest text one placeholder fills in.
	maxValue = 256
	// missing is what a placeholder fills in when the call lacks the
	// value.
	missing = "(none)"
)

// A template is a rule's title or description: text with placeholders
// such as {{args.amount}}, which [Rule.Card] fills from the call. It is
// a plain substitution, not a template language: a placeholder is a name
// and nothing else, so a rule set cannot run code or loop.
type template struct {
	parts []part
}

// part is a run of literal text, or a placeholder's path (args, amount).
type part struct {
	text string
	path []string
}

// The names a placeholder may start with: the fields of a [Request].
var (
	placeholderRoots = []string{"args", "context", "tool", "agent", "conversationId"}
	placeholderKey   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// parseTemplate reads a title or description. It fails on a {{ that is
// not closed and on a placeholder that does not name a field of the call,
// saying how to write one.
func parseTemplate(s string) (template, error) {
	var t template
	for s != "" {
		open := strings.Index(s, "{{")
		if open < 0 {
			t.parts = append(t.parts, part{text: s})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, part{text: s[:open]})
		}
		rest := s[open+2:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return template{}, fmt.Errorf("%.20q opens a placeholder with {{ but does not close it with }}; write e.g. {{args.amount}}", s[open:])
		}
		name := strings.TrimSpace(rest[:end])
		path, err := placeholderPath(name)
		if err != nil {
			return template{}, err
		}
		t.parts = append(t.parts, part{path: path})
		s = rest[end+2:]
	}
	return t, nil
}

// placeholderPath splits and checks the name between {{ and }}.
func placeholderPath(name string) ([]string, error) {
	const how = "a placeholder is args.<name>, context.<name>, tool, agent or conversationId, e.g. {{args.amount}}"
	if name == "" {
		return nil, fmt.Errorf("{{}} is an empty placeholder; %s", how)
	}
	path := strings.Split(name, ".")
	switch root := path[0]; root {
	case "args", "context":
		if len(path) == 1 {
			return nil, fmt.Errorf("{{%s}} names no %s; write {{%s.<name>}}, e.g. {{%s.amount}}", name, root, root, root)
		}
	case "tool", "agent", "conversationId":
		if len(path) > 1 {
			return nil, fmt.Errorf("{{%.40s}}: %s is text and has no fields; write {{%s}}", name, root, root)
		}
		return path, nil
	default:
		return nil, fmt.Errorf("{{%.40s}} does not name a field of the call; %s (the names are %s)", name, how, strings.Join(placeholderRoots, ", "))
	}
	for _, k := range path[1:] {
		if !placeholderKey.MatchString(k) {
			return nil, fmt.Errorf("{{%.40s}}: %.40q is not an argument's name; use letters, digits, _ and -, joined by dots", name, k)
		}
	}
	return path, nil
}

// empty reports whether the template has no text at all.
func (t template) empty() bool { return len(t.parts) == 0 }

// fill writes the template with the call's values, each passed through
// quote (which keeps it from breaking what it is written into).
func (t template) fill(req Request, shown map[string]string, quote func(string) string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.path == nil {
			b.WriteString(p.text)
			continue
		}
		if text, ok := shown[strings.Join(p.path, ".")]; ok {
			b.WriteString(quote(text))
			continue
		}
		b.WriteString(quote(valueText(lookup(req, p.path))))
	}
	return b.String()
}

// shownArgs are the call's top-level args that the rule's argsSchema gives
// a display (a currency amount, a date), as the approval's card shows
// them ("$4,800.00"), by placeholder path (args.amount): a title says an
// amount as the args below it do.
func (r *Rule) shownArgs(req Request) map[string]string {
	if len(r.ArgsSchema) == 0 || len(req.Args) == 0 {
		return nil
	}
	raw, err := json.Marshal(req.Args)
	if err != nil {
		return nil
	}
	var out map[string]string
	for _, a := range protocol.Args(raw, r.ArgsSchema) {
		if a.Display == "" || a.Text == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out["args."+a.Name] = cut(strings.Join(strings.Fields(a.Text), " "), maxValue)
	}
	return out
}

// lookup returns the call's value at path, or nil when it has none.
func lookup(req Request, path []string) any {
	var v any
	switch path[0] {
	case "tool":
		return req.Tool
	case "agent":
		return req.Agent
	case "conversationId":
		return req.ConversationID
	case "args":
		v = req.Args
	case "context":
		v = req.Context
	}
	for _, k := range path[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// valueText is a value as a person reads it: text as it is, a number in
// full (4800, 12.5), other JSON compacted, and (none) for a value the
// call lacks. Line breaks become spaces and it is cut at 256 bytes.
func valueText(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return missing
	case string:
		s = v
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		s = v.String()
	case bool:
		s = strconv.FormatBool(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return missing
		}
		s = string(b)
	}
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return missing
	}
	return cut(s, maxValue)
}

// cut shortens s to at most n bytes, ending in "…" when it cut, without
// splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	i := n - len(ellipsis)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}

// markdownSpecial are the characters that could make a value Markdown
// (a link, emphasis, a heading, code, a table, raw HTML).
var markdownSpecial = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `[`, `\[`, `]`, `\]`, `(`, `\(`, `)`, `\)`,
	`<`, `\<`, `>`, `\>`, `#`, `\#`, `!`, `\!`, `|`, `\|`, `~`, `\~`, `{`, `\{`, `}`, `\}`,
)

// Card returns the rule's title and description filled with the call's
// values: {{args.amount}} is the call's amount (as the approval's card
// shows it, "$4,800.00", when the rule's argsSchema gives it a display),
// {{tool}} its tool, and a value the call lacks reads (none). A value fills in as plain text: in
// the description its Markdown characters are escaped, so an argument
// cannot add a link or a heading to what the approver reads. Both are ""
// when the rule has none.
func (r *Rule) Card(req Request) (title, description string) {
	shown := r.shownArgs(req)
	if !r.title.empty() {
		title = cut(strings.Join(strings.Fields(r.title.fill(req, shown, func(s string) string { return s })), " "), MaxTitle)
	}
	if !r.description.empty() {
		description = cut(r.description.fill(req, shown, markdownSpecial.Replace), MaxDescription)
	}
	return title, description
}

// Limits of a rule's card, as written.
const (
	maxTitleSource       = 400
	maxDescriptionSource = 8000
	maxAssignees         = 100
)

// card reads the fields of a rule that say what the call proposes and
// who decides it: title, description, argsSchema, decisions, assignees,
// quorum and reminders.
func (p *parser) card(r *Rule, fs map[string]*yaml.Node, a at) {
	title, line, ok := p.text(fs, "title", a, "")
	switch {
	case !ok:
	case len(title) > maxTitleSource:
		p.add(line, a, "title", "is %d characters, more than %d; a title is one line: put the rest in description", len(title), maxTitleSource)
	case strings.ContainsAny(title, "\r\n"):
		p.add(line, a, "title", "is more than one line; a title is one line: put the rest in description")
	default:
		t, err := parseTemplate(title)
		if err != nil {
			p.add(line, a, "title", "%v", err)
		}
		r.Title, r.title = title, t
	}
	desc, line, ok := p.text(fs, "description", a, "")
	switch {
	case !ok:
	case len(desc) > maxDescriptionSource:
		p.add(line, a, "description", "is %d characters, more than %d; shorten it", len(desc), maxDescriptionSource)
	default:
		t, err := parseTemplate(desc)
		if err != nil {
			p.add(line, a, "description", "%v", err)
		}
		r.Description, r.description = desc, t
	}
	r.ArgsSchema = p.argsSchema(fs, a)
	r.Decisions = p.decisions(fs, a)
	r.Assignees = p.assignees(fs, a)
	r.Quorum = p.quorum(fs, a)
	r.Reminders = p.reminders(fs, r.Timeout, a)
	r.RemindEvery = p.remindEvery(fs, a)
}

// remindEvery reads field remindEvery: how often to remind the people
// who may decide while the call waits, at least a minute.
func (p *parser) remindEvery(fs map[string]*yaml.Node, a at) time.Duration {
	s, line, ok := p.text(fs, "remindEvery", a, "")
	if !ok || s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.add(line, a, "remindEvery", "%.40q is not a duration; write how often to remind, such as 30m or 4h", s)
	case d < time.Minute:
		p.add(line, a, "remindEvery", "%s is less than a minute; remind at most once a minute, e.g. 30m", s)
	default:
		return d
	}
	return 0
}

// argsSchema reads field argsSchema: a YAML mapping, or text holding a
// JSON object, which must compile as a JSON Schema of the args.
func (p *parser) argsSchema(fs map[string]*yaml.Node, a at) json.RawMessage {
	v, found := fs["argsSchema"]
	if !found || isNull(v) {
		return nil
	}
	var raw json.RawMessage
	switch v.Kind {
	case yaml.MappingNode:
		b, err := nodeJSON(v)
		if err != nil {
			p.add(v.Line, a, "argsSchema", "cannot be written as JSON: %v; write the schema as plain YAML, without aliases or tags", err)
			return nil
		}
		raw = b
	case yaml.ScalarNode:
		s := strings.TrimSpace(v.Value)
		if !json.Valid([]byte(s)) {
			p.add(v.Line, a, "argsSchema", "is text that is not JSON; write the schema as a YAML mapping (`argsSchema: {type: object, properties: ...}`) or as a JSON object")
			return nil
		}
		raw = json.RawMessage(s)
	default:
		p.add(v.Line, a, "argsSchema", "must be a JSON Schema object such as `{type: object, properties: {amount: {type: number}}}`, not %s", describe(v))
		return nil
	}
	if err := engine.CheckArgsSchema(raw); err != nil {
		p.add(v.Line, a, "argsSchema", "%v; fix the schema (JSON Schema draft 2020-12, of an object: the call's args)", err)
		return nil
	}
	return raw
}

// nodeJSON writes a YAML node as JSON, keeping the order of mappings
// (surfaces show arguments in the order of the schema's properties).
func nodeJSON(n *yaml.Node) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, n, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > 64 {
		return errors.New("it nests more than 64 levels deep")
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key is %s; keys are names", k.Line, describe(k))
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			if err := writeJSON(b, v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %.40q is not a JSON value", n.Line, n.Value)
		}
		b.Write(out)
	default:
		return fmt.Errorf("line %d: %s is not allowed here", n.Line, describe(n))
	}
	return nil
}

// list reads field key of fs as a list of text, each trimmed and not
// blank; ok is false when it is malformed, which is reported.
func (p *parser) list(fs map[string]*yaml.Node, key string, a at, example string) (items []string, lines []int, ok bool) {
	v, found := fs[key]
	if !found || isNull(v) {
		return nil, nil, true
	}
	if v.Kind != yaml.SequenceNode {
		p.add(v.Line, a, key, "must be a list, e.g. `%s: %s`, not %s", key, example, describe(v))
		return nil, nil, false
	}
	if len(v.Content) == 0 {
		p.add(v.Line, a, key, "is an empty list; list at least one, e.g. `%s: %s`, or leave %s out", key, example, key)
		return nil, nil, false
	}
	for i, it := range v.Content {
		if it.Kind != yaml.ScalarNode || isNull(it) || strings.TrimSpace(it.Value) == "" {
			p.add(it.Line, a, fmt.Sprintf("%s[%d]", key, i), "must be text, not %s", describe(it))
			ok = false
			continue
		}
		items, lines = append(items, strings.TrimSpace(it.Value)), append(lines, it.Line)
	}
	return items, lines, len(items) == len(v.Content)
}

// decisions reads field decisions.
func (p *parser) decisions(fs map[string]*yaml.Node, a at) []protocol.Verdict {
	items, lines, ok := p.list(fs, "decisions", a, "[approve, reject, respond]")
	if !ok || items == nil {
		return nil
	}
	var out []protocol.Verdict
	for i, s := range items {
		d := protocol.Verdict(s)
		switch {
		case !slices.Contains(protocol.AllVerdicts(), d):
			p.add(lines[i], a, fmt.Sprintf("decisions[%d]", i), "%.40q is not a decision; use approve, edit, reject or respond (in lower case)", s)
		case slices.Contains(out, d):
			p.add(lines[i], a, fmt.Sprintf("decisions[%d]", i), "%s is listed twice; keep one", s)
		default:
			out = append(out, d)
		}
	}
	if !slices.ContainsFunc(out, func(d protocol.Verdict) bool { return d == protocol.VerdictApprove || d == protocol.VerdictEdit }) && len(out) == len(items) {
		p.add(fs["decisions"].Line, a, "decisions", "lists no way to let the call run; add approve (or edit), e.g. `decisions: [approve, reject, respond]`")
	}
	return out
}

// assignees reads field assignees: people, by the names their surfaces
// authenticate them with.
func (p *parser) assignees(fs map[string]*yaml.Node, a at) []string {
	items, lines, ok := p.list(fs, "assignees", a, "[ann@example.com]")
	if !ok || items == nil {
		return nil
	}
	if len(items) > maxAssignees {
		p.add(lines[0], a, "assignees", "lists %d people, more than %d; name a role with approverRole instead", len(items), maxAssignees)
		return nil
	}
	for i, s := range items {
		switch {
		case len(s) > protocol.MaxNameLen || strings.IndexFunc(s, unicode.IsControl) >= 0:
			p.add(lines[i], a, fmt.Sprintf("assignees[%d]", i), "%.40q is not a person's name; give 1 to %d characters without control characters, e.g. ann@example.com", s, protocol.MaxNameLen)
		case slices.Index(items, s) < i:
			p.add(lines[i], a, fmt.Sprintf("assignees[%d]", i), "%.40q is listed twice; keep one", s)
		}
	}
	return items
}

// quorum reads field quorum: {required: N}, or a list of {role, count}.
func (p *parser) quorum(fs map[string]*yaml.Node, a at) *protocol.Quorum {
	v, found := fs["quorum"]
	if !found || isNull(v) {
		return nil
	}
	const how = "write `quorum: {required: 2}` for two distinct approvers, or `quorum: [{role: legal, count: 1}, {role: finance, count: 1}]`"
	if v.Kind != yaml.MappingNode && v.Kind != yaml.SequenceNode {
		p.add(v.Line, a, "quorum", "is %s; %s", describe(v), how)
		return nil
	}
	raw, err := nodeJSON(v)
	if err != nil {
		p.add(v.Line, a, "quorum", "%v; %s", err, how)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var q protocol.Quorum
	if v.Kind == yaml.SequenceNode {
		err = dec.Decode(&q.Roles)
	} else {
		var r struct {
			Required int `json:"required"`
		}
		err = dec.Decode(&r)
		q.Required = r.Required
	}
	if err != nil {
		p.add(v.Line, a, "quorum", "cannot be read (%v); %s", err, how)
		return nil
	}
	if err := q.Check(); err != nil {
		p.add(v.Line, a, "quorum", "%s; %s", strings.TrimPrefix(err.Error(), "quorum: "), how)
		return nil
	}
	if q.Required == 1 {
		p.add(v.Line, a, "quorum", "required 1 is one approver, as without a quorum; leave quorum out, or require 2 or more")
		return nil
	}
	return &q
}

// reminders reads field reminders: durations before the rule's timeout.
func (p *parser) reminders(fs map[string]*yaml.Node, timeout time.Duration, a at) []time.Duration {
	items, lines, ok := p.list(fs, "reminders", a, "[10m, 2m]")
	if !ok || items == nil {
		return nil
	}
	if timeout == 0 {
		p.add(lines[0], a, "reminders", "are set but there is no timeout to remind before; add one, e.g. `timeout: 30m`, or remove reminders")
		return nil
	}
	var out []time.Duration
	for i, s := range items {
		field := fmt.Sprintf("reminders[%d]", i)
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			p.add(lines[i], a, field, "%.40q is not a duration; write how long before the deadline, such as 10m or 2m", s)
		case d < time.Second:
			p.add(lines[i], a, field, "%s is less than a second; give how long before the deadline to remind, at least 1s, e.g. 10m", s)
		case d >= timeout:
			p.add(lines[i], a, field, "%s before the deadline is before the approval is asked (timeout is %s); give less than the timeout", s, timeout)
		case slices.Contains(out, d):
			p.add(lines[i], a, field, "%s is listed twice; keep one", s)
		default:
			out = append(out, d)
		}
	}
	return out
}
