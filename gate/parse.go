package gate

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"cel.dev/cel-go/cel"
	yaml "go.yaml.in/yaml/v3"
)

// Limits of a rule set. Each keeps a rule set something a person can read
// and a worker can load quickly; a rule set past one is refused.
const (
	// MaxSourceSize is the largest rule set, in bytes: 1 MiB, what a
	// JetStream KV value holds under NATS's default max_payload.
	MaxSourceSize = 1 << 20
	// MaxRules is the most rules a rule set may have.
	MaxRules = 1000
	// MaxEscalations is the longest escalation chain a rule may have.
	MaxEscalations = 10

	maxNameLen   = 128
	maxToolLen   = 256
	maxRoleLen   = 128
	maxReasonLen = 2000
	maxWhenLen   = 4096
	// maxErrors is how many problems one error reports.
	maxErrors = 20
)

// Error is a problem in a rule set: where it is, what is wrong, and how
// to fix it. [Parse] returns one, or several joined with errors.Join;
// errors.As finds the first.
type Error struct {
	// Source is the name given to Parse.
	Source string
	// Line is the line in the YAML, 0 when the problem has none.
	Line int
	// Rule is the 1-based index of the rule, 0 when the problem is not in
	// one rule; Name is the rule's name when it is known.
	Rule int
	Name string
	// Field is the field at fault, e.g. "when" or "escalate.timeout".
	Field string
	// Msg says what is wrong and how to fix it. For a when expression it
	// holds CEL's position in the expression as (at line:column).
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("gate rules ")
	b.WriteString(e.Source)
	b.WriteString(": ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Rule > 0 {
		fmt.Fprintf(&b, "rule %d", e.Rule)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%s)", e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Field names, as written in YAML.
var (
	topFields  = []string{"rules"}
	ruleFields = []string{"name", "tool", "server", "when", "editWhen", "reason", "approverRole", "timeout", "onTimeout", "escalate",
		"title", "description", "argsSchema", "decisions", "assignees", "quorum", "reminders", "remindEvery"}
	escalationFields = []string{"approverRole", "timeout", "onTimeout", "escalate"}
)

var roleRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Parse reads and compiles a rule set from YAML. name says where data
// came from (a file name, or "kv interlock_config gate.rules") and starts
// every error message.
//
// The YAML is read strictly: unknown or repeated fields, aliases, more
// than one document, and anything missing or malformed are refused, with
// every problem found (up to 20) in the error, each an [*Error]. Every
// when expression is type-checked here, so a rule set that parses never
// fails to compile later. An empty list, `rules: []`, is valid and allows
// every call; an empty file is not.
func Parse(data []byte, name string) (*RuleSet, error) {
	p := &parser{source: name}
	rs := p.parse(data)
	if err := p.err(); err != nil {
		return nil, err
	}
	return rs, nil
}

type parser struct {
	source string
	env    *cel.Env
	// editEnv is the environment of editWhen expressions.
	editEnv *cel.Env
	errs    []error
	more    int // problems past maxErrors
}

// at is where in the rule set a problem is.
type at struct {
	rule int
	name string
}

func (p *parser) add(line int, a at, field, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, &Error{Source: p.source, Line: line, Rule: a.rule, Name: a.name, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	if p.more > 0 {
		p.errs = append(p.errs, fmt.Errorf("gate rules %s: %d more problems not listed; fix the ones above and load again", p.source, p.more))
	}
	return errors.Join(p.errs...)
}

func (p *parser) parse(data []byte) (rs *RuleSet) {
	none := at{}
	if len(data) > MaxSourceSize {
		p.add(0, none, "", "the rule set is %d bytes, more than the %d a KV value holds; split long reasons or remove rules", len(data), MaxSourceSize)
		return nil
	}
	doc, ok := p.document(data)
	if !ok {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.add(root.Line, none, "", "the rule set must be a mapping with a rules list, e.g. `rules: []`; found %s", describe(root))
		return nil
	}
	fields := p.fields(root, topFields, none, "")
	list, ok := fields["rules"]
	if !ok || isNull(list) {
		p.add(root.Line, none, "rules", "is missing; list the rules under `rules:`, or write `rules: []` to let every call through")
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		p.add(list.Line, none, "rules", "must be a list of rules, each starting with `- tool: ...`; found %s", describe(list))
		return nil
	}
	if len(list.Content) > MaxRules {
		p.add(list.Line, none, "rules", "has %d rules, more than %d; merge rules with the same tool and approver into one when", len(list.Content), MaxRules)
		return nil
	}
	rs = &RuleSet{name: p.source, source: bytes.Clone(data), byTool: map[string][]int{}}
	names := map[string]int{}
	for i, item := range list.Content {
		r := p.rule(i+1, item)
		if r == nil {
			continue
		}
		if first, dup := names[r.Name]; dup {
			p.add(item.Line, at{r.Index, r.Name}, "name", "%q is already the name of rule %d; give each rule its own name", r.Name, first)
			continue
		}
		names[r.Name] = r.Index
		rs.byTool[r.Tool] = append(rs.byTool[r.Tool], len(rs.rules))
		rs.rules = append(rs.rules, *r)
	}
	return rs
}

// document reads the one YAML document of data.
func (p *parser) document(data []byte) (doc *yaml.Node, ok bool) {
	// The YAML library is third-party code fed bytes from the network (a
	// KV value); a panic in it is reported as a refusal, not a crash.
	defer func() {
		if v := recover(); v != nil {
			p.add(0, at{}, "", "the YAML parser failed on this input (%v); check the file is plain YAML text", v)
			doc, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, at{}, "", "the rule set is empty; list the rules under `rules:`, or write `rules: []` to let every call through")
		} else {
			p.yamlError(err)
		}
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.add(next.Line, at{}, "", "a second YAML document starts here; keep all rules in one document, under one `rules:` list")
		return nil, false
	case !errors.Is(err, io.EOF):
		p.yamlError(err)
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.add(0, at{}, "", "the rule set is empty; list the rules under `rules:`, or write `rules: []` to let every call through")
		return nil, false
	}
	return doc, true
}

// yamlError reports a syntax error of the YAML library, with its line.
func (p *parser) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = v, after
			}
		}
	}
	p.add(line, at{}, "", "the file is not valid YAML: %s; check the indentation, the colons, and quote values that hold \": \" or \" #\"", msg)
}

// fields returns the values of mapping node n by key, reporting keys that
// are not in known, repeated keys, and aliases. prefix is the path of n
// for error messages ("escalate." for an escalation).
func (p *parser) fields(n *yaml.Node, known []string, a at, prefix string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, a, strings.TrimSuffix(prefix, "."), "has a key that is %s; keys are field names such as %s", describe(k), known[0])
			continue
		}
		key := k.Value
		if !slices.Contains(known, key) {
			msg := fmt.Sprintf("unknown field %q", key)
			if s := suggest(known, key); s != "" {
				msg += fmt.Sprintf("; did you mean %q? Field names are case-sensitive", s)
			} else {
				msg += "; the fields here are " + strings.Join(known, ", ")
			}
			p.add(k.Line, a, strings.TrimSuffix(prefix, "."), "%s", msg)
			continue
		}
		if _, dup := out[key]; dup {
			p.add(k.Line, a, prefix+key, "is set twice; keep one")
			continue
		}
		if v.Kind == yaml.AliasNode {
			p.add(v.Line, a, prefix+key, "is a YAML alias (*%s); write the value out in full", v.Value)
			continue
		}
		out[key] = v
	}
	return out
}

// text returns field key of fs as text, trimmed, and its line; "" when
// it is absent, null or blank. A list or mapping is reported, and ok is
// then false.
func (p *parser) text(fs map[string]*yaml.Node, key string, a at, prefix string) (s string, line int, ok bool) {
	v, found := fs[key]
	if !found {
		return "", 0, true
	}
	if isNull(v) {
		return "", v.Line, true
	}
	if v.Kind != yaml.ScalarNode {
		p.add(v.Line, a, prefix+key, "must be text, not %s", describe(v))
		return "", v.Line, false
	}
	return strings.TrimSpace(v.Value), v.Line, true
}

// peek returns the text of key in mapping n before its fields are read,
// to name the rule in the errors about them.
func peek(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == key && v.Kind == yaml.ScalarNode && !isNull(v) {
			return strings.TrimSpace(v.Value)
		}
	}
	return ""
}

// rule reads the rule at 1-based index idx. It returns nil when the rule
// has problems, which are reported.
func (p *parser) rule(idx int, n *yaml.Node) *Rule {
	a := at{rule: idx}
	if n.Kind == yaml.AliasNode {
		p.add(n.Line, a, "", "is a YAML alias (*%s); write the rule out in full", n.Value)
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, a, "", "must be a mapping of fields (tool, reason, approverRole, ...), not %s", describe(n))
		return nil
	}
	before := len(p.errs) + p.more
	r := &Rule{Index: idx, Name: peek(n, "name")}
	if r.Name == "" && peek(n, "tool") != "" {
		r.Name = peek(n, "tool") + "#" + strconv.Itoa(idx)
	}
	a.name = r.Name
	fs := p.fields(n, ruleFields, a, "")

	name, nameLine, _ := p.text(fs, "name", a, "")
	if len(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		p.add(nameLine, a, "name", "must be at most %d characters, without control characters; shorten it", maxNameLen)
	}
	tool, toolLine, ok := p.text(fs, "tool", a, "")
	switch {
	case !ok:
	case tool == "":
		p.add(n.Line, a, "tool", "is missing; give the exact name of the tool the rule applies to, e.g. `tool: issue_refund`")
	case len(tool) > maxToolLen || strings.IndexFunc(tool, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0:
		p.add(toolLine, a, "tool", "%.40q is not a tool name; give the exact name the agent calls, without spaces, at most %d characters", tool, maxToolLen)
	}
	r.Tool = tool
	server, serverLine, _ := p.text(fs, "server", a, "")
	if len(server) > maxToolLen || strings.IndexFunc(server, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0 {
		p.add(serverLine, a, "server", "%.40q is not a server's name; give the name the MCP gateway's configuration gives the upstream, without spaces, at most %d characters", server, maxToolLen)
	}
	r.Server = server

	reason, reasonLine, ok := p.text(fs, "reason", a, "")
	switch {
	case !ok:
	case reason == "":
		p.add(n.Line, a, "reason", "is missing; say why the call needs approval, for the approver to read, e.g. `reason: Refund exceeds $500`")
	case len(reason) > maxReasonLen:
		p.add(reasonLine, a, "reason", "is %d characters, more than %d; shorten it", len(reason), maxReasonLen)
	}
	r.Reason = reason
	r.ApproverRole = p.role(fs, n.Line, a, "")
	r.Timeout, r.OnTimeout, r.Escalate = p.deadline(fs, n.Line, 0, a, "")
	p.card(r, fs, a)

	when, whenLine, _ := p.text(fs, "when", a, "")
	r.When = when
	switch {
	case when == "":
	case len(when) > maxWhenLen:
		p.add(whenLine, a, "when", "is %d characters, more than %d; split the rule in two", len(when), maxWhenLen)
	default:
		if p.env == nil {
			env, err := newEnv()
			if err != nil {
				p.add(0, at{}, "", "cannot set up CEL: %v; report this as a bug", err)
				return nil
			}
			p.env = env
		}
		prg, msg := compile(p.env, when)
		if msg != "" {
			p.add(whenLine, a, "when", "%s", msg)
		}
		r.program = prg
	}
	editWhen, editLine, _ := p.text(fs, "editWhen", a, "")
	r.EditWhen = editWhen
	switch {
	case editWhen == "":
	case len(editWhen) > maxWhenLen:
		p.add(editLine, a, "editWhen", "is %d characters, more than %d; shorten it", len(editWhen), maxWhenLen)
	default:
		if p.editEnv == nil {
			env, err := newEditEnv()
			if err != nil {
				p.add(0, at{}, "", "cannot set up CEL: %v; report this as a bug", err)
				return nil
			}
			p.editEnv = env
		}
		prg, msg := compile(p.editEnv, editWhen)
		if msg != "" {
			p.add(editLine, a, "editWhen", "%s", strings.Replace(msg, variables, editVariables, 1))
		}
		r.editProgram = prg
	}
	if len(p.errs)+p.more > before {
		return nil
	}
	return r
}

// role reads and checks field approverRole of fs, a mapping at line.
func (p *parser) role(fs map[string]*yaml.Node, line int, a at, prefix string) string {
	role, roleLine, ok := p.text(fs, "approverRole", a, prefix)
	switch {
	case !ok:
	case role == "":
		p.add(cmp.Or(roleLine, line), a, prefix+"approverRole", "is missing; name the role that may approve, e.g. `approverRole: supervisor`")
	case !roleRE.MatchString(role):
		p.add(roleLine, a, prefix+"approverRole", "%.40q is not a role name; use 1 to %d letters, digits, _ or -, e.g. retention_lead", role, maxRoleLen)
	}
	return role
}

// deadline reads timeout, onTimeout and escalate of fs, a mapping at
// line: a rule's (depth 0), which may have no timeout, or an
// escalation's (depth 1 and more), which must.
func (p *parser) deadline(fs map[string]*yaml.Node, line, depth int, a at, prefix string) (time.Duration, TimeoutAction, *Escalation) {
	timeout, timeoutOK := p.duration(fs, a, prefix)
	action, actionLine, actionOK := p.text(fs, "onTimeout", a, prefix)
	esc, hasEsc := fs["escalate"]
	if hasEsc && isNull(esc) {
		hasEsc = false
	}
	if !timeoutOK || !actionOK {
		return 0, "", nil
	}
	if timeout == 0 {
		if depth > 0 {
			p.add(line, a, prefix+"timeout", "is missing; an escalation needs one, e.g. `timeout: 24h`")
			return 0, "", nil
		}
		if action != "" {
			p.add(actionLine, a, prefix+"onTimeout", "is set but there is no timeout; add one, e.g. `timeout: 30m`, or remove onTimeout")
		}
		if hasEsc {
			p.add(esc.Line, a, prefix+"escalate", "is set but there is no timeout; add `timeout:` and `onTimeout: escalate`, or remove escalate")
		}
		return 0, "", nil
	}
	act := Expire
	if action != "" {
		act = TimeoutAction(action)
		switch act {
		case Expire, Reject, Approve, Escalate:
		default:
			msg := fmt.Sprintf("%.40q is not an action; use expire (the default), reject, approve or escalate", action)
			switch lower := TimeoutAction(strings.ToLower(action)); lower {
			case Expire, Reject, Approve, Escalate:
				msg = fmt.Sprintf("%q must be written in lower case: %s", action, lower)
			}
			p.add(actionLine, a, prefix+"onTimeout", "%s", msg)
			return 0, "", nil
		}
	}
	switch {
	case act == Escalate && !hasEsc:
		p.add(actionLine, a, prefix+"escalate", "is missing; onTimeout: escalate needs `escalate: {approverRole: ..., timeout: ...}`, saying where the approval goes next")
		return 0, "", nil
	case act != Escalate && hasEsc:
		p.add(esc.Line, a, prefix+"escalate", "is set but onTimeout is %s; set `onTimeout: escalate`, or remove escalate", act)
		return 0, "", nil
	case act != Escalate:
		return timeout, act, nil
	}
	return timeout, act, p.escalation(esc, depth+1, a, prefix+"escalate.")
}

// escalation reads the escalation node n, depth steps down the chain.
func (p *parser) escalation(n *yaml.Node, depth int, a at, prefix string) *Escalation {
	field := strings.TrimSuffix(prefix, ".")
	if depth > MaxEscalations {
		p.add(n.Line, a, field, "the escalation chain is more than %d steps long; end it sooner with onTimeout: expire or reject", MaxEscalations)
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, a, field, "must be a mapping such as `{approverRole: general_counsel, timeout: 24h}`, not %s", describe(n))
		return nil
	}
	fs := p.fields(n, escalationFields, a, prefix)
	e := &Escalation{ApproverRole: p.role(fs, n.Line, a, prefix)}
	e.Timeout, e.OnTimeout, e.Escalate = p.deadline(fs, n.Line, depth, a, prefix)
	return e
}

// duration reads field timeout of fs: 0 when absent. ok is false when it
// is malformed, which is reported.
func (p *parser) duration(fs map[string]*yaml.Node, a at, prefix string) (d time.Duration, ok bool) {
	s, line, ok := p.text(fs, "timeout", a, prefix)
	if s == "" {
		return 0, ok
	}
	field := prefix + "timeout"
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && strings.Contains(err.Error(), "missing unit"):
		p.add(line, a, field, "%.40q has no unit; write a duration such as 30m, 2h or 24h", s)
	case err != nil && strings.HasSuffix(s, "d"):
		p.add(line, a, field, "%.40q is not a duration: days are not a unit; write hours, e.g. 48h", s)
	case err != nil:
		p.add(line, a, field, "%.40q is not a duration; write one such as 90s, 30m, 1h30m or 24h", s)
	case d < 0:
		p.add(line, a, field, "%s is negative; give a positive duration such as 30m", s)
	case d == 0:
		p.add(line, a, field, "%s is zero; leave timeout out for no deadline, or give a positive duration such as 30m", s)
	case d < time.Second:
		p.add(line, a, field, "%s is less than a second; give at least 1s, e.g. 30m", s)
	default:
		return d, true
	}
	return 0, false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of n for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("the value %.40q", n.Value)
	}
	return "something else"
}

// suggest returns the known field that s misspells by case, or "".
func suggest(known []string, s string) string {
	for _, k := range known {
		if strings.EqualFold(k, s) || strings.EqualFold(k, strings.NewReplacer("_", "", "-", "").Replace(s)) {
			return k
		}
	}
	return ""
}
