package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/interlockhq/interlock/protocol"
)

// ParseStart parses start data. Empty data is a start with no initial state.
func ParseStart(data []byte) (protocol.Start, error) {
	var s protocol.Start
	if isEmpty(data) {
		return s, nil
	}
	if err := decodeStrict(data, &s, "start"); err != nil {
		return protocol.Start{}, err
	}
	if string(trimJSON(s.Origin)) == "null" {
		s.Origin = nil
	}
	if len(s.Origin) > 0 && !isObject(s.Origin) {
		return protocol.Start{}, invalid("data.origin", "must be a JSON object, such as {\"slack\":{\"channel\":\"C1\"}}")
	}
	return s, nil
}

// ParseReannounce parses reannounce data. Empty data reannounces whatever
// is pending.
func ParseReannounce(data []byte) (protocol.Reannounce, error) {
	var r protocol.Reannounce
	if isEmpty(data) {
		return r, nil
	}
	if err := decodeStrict(data, &r, "reannounce"); err != nil {
		return protocol.Reannounce{}, err
	}
	return r, nil
}

// ParseMigrate parses migrate data: from and to are required.
func ParseMigrate(data []byte) (protocol.Migrate, error) {
	var m protocol.Migrate
	if isEmpty(data) {
		return m, invalid("data", `is empty; a migrate names the versions: {"from": "1", "to": "2"}`)
	}
	if err := decodeStrict(data, &m, "migrate"); err != nil {
		return protocol.Migrate{}, err
	}
	switch {
	case m.From == "":
		return protocol.Migrate{}, invalid("data.from", "is missing; name the version the run is at")
	case m.To == "":
		return protocol.Migrate{}, invalid("data.to", "is missing; name the version to move the run to")
	case m.From == m.To:
		return protocol.Migrate{}, invalid("data.to", "is the same version as from; name another")
	}
	return m, nil
}

// ParseToolRequest parses tool request data: callId and tool are required;
// context and origin, when given, are objects and messages a list.
func ParseToolRequest(data []byte) (protocol.ToolRequest, error) {
	var r protocol.ToolRequest
	if isEmpty(data) {
		return r, invalid("data", "is empty; a tool request needs callId, tool and args")
	}
	if err := decodeStrict(data, &r, "tool request"); err != nil {
		return protocol.ToolRequest{}, err
	}
	switch {
	case r.CallID == "":
		return protocol.ToolRequest{}, invalid("data.callId", "is missing; name the call (it becomes the gate run's id)")
	case r.Tool == "":
		return protocol.ToolRequest{}, invalid("data.tool", "is missing; name the tool the agent wants to call")
	case len(r.Context) > 0 && !isObject(r.Context):
		return protocol.ToolRequest{}, invalid("data.context", "must be a JSON object")
	case len(r.Origin) > 0 && !isObject(r.Origin):
		return protocol.ToolRequest{}, invalid("data.origin", "must be a JSON object")
	case len(r.Messages) > 0 && !bytes.HasPrefix(bytes.TrimSpace(r.Messages), []byte("[")):
		return protocol.ToolRequest{}, invalid("data.messages", "must be a JSON list")
	}
	return r, nil
}

// ParseConsume parses consume data: callId and argsDigest are required.
func ParseConsume(data []byte) (protocol.Consume, error) {
	var c protocol.Consume
	if isEmpty(data) {
		return c, invalid("data", "is empty; a consume needs callId and argsDigest")
	}
	if err := decodeStrict(data, &c, "consume"); err != nil {
		return protocol.Consume{}, err
	}
	switch {
	case c.CallID == "":
		return protocol.Consume{}, invalid("data.callId", "is missing; name the call whose approval to take")
	case len(c.ArgsDigest) != 64 || strings.Trim(c.ArgsDigest, "0123456789abcdef") != "":
		return protocol.Consume{}, invalid("data.argsDigest", "must be the 64 lower-case hex digits of the args' digest: the decided event's finalDigest")
	}
	return c, nil
}

// ParseExpire parses expire data; requestId is required.
func ParseExpire(data []byte) (protocol.Expire, error) {
	var e protocol.Expire
	if err := decodeStrict(data, &e, "expire"); err != nil {
		return protocol.Expire{}, err
	}
	if e.RequestID == "" {
		return protocol.Expire{}, &Error{Reason: ReasonInvalidPayload, Msg: "expire data needs requestId"}
	}
	return e, nil
}

// ParseRemind parses the data of a reminder the server published from a
// schedule: requestId is required.
func ParseRemind(data []byte) (protocol.Remind, error) {
	var r protocol.Remind
	if err := decodeStrict(data, &r, "remind"); err != nil {
		return protocol.Remind{}, err
	}
	if r.RequestID == "" {
		return protocol.Remind{}, &Error{Reason: ReasonInvalidPayload, Msg: "remind data needs requestId"}
	}
	return r, nil
}

// ParseAssign parses assign data: requestId and op are required, to with
// a delegation.
func ParseAssign(data []byte) (protocol.Assign, error) {
	var a protocol.Assign
	if isEmpty(data) {
		return a, invalid("data", `is empty; an assign needs requestId and op (claim, release or delegate), such as {"requestId":"rq_...","op":"claim"}`)
	}
	if err := decodeStrict(data, &a, "assign"); err != nil {
		return protocol.Assign{}, err
	}
	switch {
	case a.RequestID == "":
		return protocol.Assign{}, invalid("data.requestId", "is missing; name the pending request, from the interrupted event")
	case a.Op != protocol.AssignClaim && a.Op != protocol.AssignRelease && a.Op != protocol.AssignDelegate:
		return protocol.Assign{}, invalid("data.op", "is %q; use claim, release or delegate", a.Op)
	case a.Op == protocol.AssignDelegate && a.To == "":
		return protocol.Assign{}, invalid("data.to", "is missing; a delegation names a person, or a role as role:<name>")
	case a.Op != protocol.AssignDelegate && a.To != "":
		return protocol.Assign{}, invalid("data.to", "is taken only with op delegate")
	}
	return a, nil
}

// ParseCancel parses cancel data. Empty data is a cancel with no reason.
func ParseCancel(data []byte) (protocol.Cancel, error) {
	var c protocol.Cancel
	if isEmpty(data) {
		return c, nil
	}
	if err := decodeStrict(data, &c, "cancel"); err != nil {
		return protocol.Cancel{}, err
	}
	return c, nil
}

// ParseResume parses resume data. selected is accepted in its four shapes: a
// string, a list of strings, {"choice":{"id":...}} and
// {"choices":[{"id":...},...]}; Resume.Selected holds the ids.
func ParseResume(data []byte) (protocol.Resume, error) {
	var raw struct {
		protocol.Resume
		Selected json.RawMessage `json:"selected,omitempty"`
	}
	if isEmpty(data) {
		return protocol.Resume{}, invalid("data", "is empty; a resume needs at least a resumeToken and the answer")
	}
	if err := decodeStrict(data, &raw, "resume"); err != nil {
		// encoding/json puts the Go name of the embedded struct in the path
		// of a mistyped field ("Resume.answers"); the client knows only the
		// JSON name.
		var e *Error
		if errors.As(err, &e) {
			if rest, ok := strings.CutPrefix(e.Field, "data.Resume."); ok {
				e.Field = "data." + rest
			}
		}
		return protocol.Resume{}, err
	}
	r := raw.Resume
	if len(raw.Selected) > 0 && string(raw.Selected) != "null" {
		ids, err := ParseSelected(raw.Selected)
		if err != nil {
			return protocol.Resume{}, err
		}
		r.Selected = ids
	}
	switch protocol.Verdict(r.Decision) {
	case "", protocol.VerdictApprove, protocol.VerdictEdit, protocol.VerdictReject, protocol.VerdictRespond:
	default:
		return protocol.Resume{}, invalid("data.decision", "is %q; use one of approve, edit, reject, respond", r.Decision)
	}
	for k := range r.Answers {
		if k == "" {
			return protocol.Resume{}, invalid("data.answers", "has an empty field name")
		}
	}
	return r, nil
}

// ParseSelected reads the ids of a choice answer in any of its four shapes.
func ParseSelected(raw json.RawMessage) ([]string, error) {
	const shapes = `"id", ["id", ...], {"choice":{"id":"..."}} or {"choices":[{"id":"..."}, ...]}`
	raw = trimJSON(raw)
	if len(raw) == 0 {
		return nil, invalid("data.selected", "is empty; send %s", shapes)
	}
	switch raw[0] {
	case '"':
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, invalid("data.selected", "is not a valid string: %v", err)
		}
		if err := checkID(id, "data.selected"); err != nil {
			return nil, err
		}
		return []string{id}, nil
	case '[':
		var ids []string
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, invalid("data.selected", "must be a list of option ids (strings): %v", cleanJSONErr(err))
		}
		for i, id := range ids {
			if err := checkID(id, fmt.Sprintf("data.selected[%d]", i)); err != nil {
				return nil, err
			}
		}
		return ids, nil
	case '{':
		var obj struct {
			Choice  *struct{ ID *string }   `json:"choice"`
			Choices *[]struct{ ID *string } `json:"choices"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, invalid("data.selected", "must be %s: %v", shapes, cleanJSONErr(err))
		}
		switch {
		case obj.Choice != nil && obj.Choices != nil:
			return nil, invalid("data.selected", "has both \"choice\" and \"choices\"; send one")
		case obj.Choice != nil:
			if obj.Choice.ID == nil {
				return nil, invalid("data.selected.choice.id", "is missing")
			}
			if err := checkID(*obj.Choice.ID, "data.selected.choice.id"); err != nil {
				return nil, err
			}
			return []string{*obj.Choice.ID}, nil
		case obj.Choices != nil:
			ids := make([]string, 0, len(*obj.Choices))
			for i, c := range *obj.Choices {
				field := fmt.Sprintf("data.selected.choices[%d].id", i)
				if c.ID == nil {
					return nil, invalid(field, "is missing")
				}
				if err := checkID(*c.ID, field); err != nil {
					return nil, err
				}
				ids = append(ids, *c.ID)
			}
			return ids, nil
		}
	}
	return nil, invalid("data.selected", "must be %s", shapes)
}

func checkID(id, field string) error {
	if strings.TrimSpace(id) == "" {
		return invalid(field, "is an empty option id")
	}
	return nil
}

func decodeStrict(data []byte, v any, what string) error {
	if !isObject(data) {
		return invalid("data", "%s data must be a JSON object", what)
	}
	if err := duplicateKeys(data, "data"); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("data", "has trailing content after the JSON object")
	}
	return nil
}

func jsonError(err error, what string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return invalid("data."+te.Field, "must be %s, not JSON %s", describe(te.Type.String()), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return invalid("data", "%s data has unknown field %s; check the spelling against the protocol", what, f)
	}
	return invalid("data", "%s data is not valid JSON: %v", what, cleanJSONErr(err))
}

func describe(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.Contains(goType, "int"):
		return "a non-negative whole number"
	}
	return "of type " + goType
}

func cleanJSONErr(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// trimJSON trims the whitespace JSON allows around a value, and no other.
func trimJSON(data []byte) []byte { return bytes.Trim(data, " \t\r\n") }

func isEmpty(data []byte) bool {
	t := trimJSON(data)
	return len(t) == 0 || string(t) == "null"
}

func isObject(data []byte) bool {
	t := trimJSON(data)
	return len(t) > 0 && t[0] == '{'
}

// ParseAsk parses the data of an ask (io.interlock.ask.requested):
// askId and interrupt.kind are required; what each kind needs the engine
// checks (engine.CheckAsk), saying what to fix.
func ParseAsk(data []byte) (protocol.AskRequest, error) {
	var a protocol.AskRequest
	if isEmpty(data) {
		return a, invalid("data", `is empty; an ask needs askId and interrupt, such as {"askId":"ask-1","interrupt":{"kind":"question","questions":[{"field":"address","question":"Where should we ship it?"}]}}`)
	}
	if err := decodeStrict(data, &a, "ask"); err != nil {
		return protocol.AskRequest{}, err
	}
	switch {
	case a.AskID == "":
		return protocol.AskRequest{}, invalid("data.askId", "is missing; name the ask (it becomes the ask run's id, and repeating it never asks twice)")
	case a.Interrupt.Kind == "":
		return protocol.AskRequest{}, invalid("data.interrupt.kind", "is missing; use question, choice or approval")
	case len(a.Context) > 0 && !isObject(a.Context):
		return protocol.AskRequest{}, invalid("data.context", "must be a JSON object")
	case len(a.Origin) > 0 && !isObject(a.Origin):
		return protocol.AskRequest{}, invalid("data.origin", "must be a JSON object")
	case len(a.Messages) > 0 && !bytes.HasPrefix(bytes.TrimSpace(a.Messages), []byte("[")):
		return protocol.AskRequest{}, invalid("data.messages", "must be a JSON list")
	}
	return a, nil
}
