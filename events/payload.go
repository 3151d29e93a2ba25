package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Start is the data of an io.interlock.run.start event.
type Start struct {
	// State is the run's initial state, a JSON object. Its values fill
	// question fields, so an interrupt whose fields are all given is skipped.
	State map[string]json.RawMessage `json:"state,omitempty"`
	// Origin is any JSON object, echoed unchanged in every event of the run.
	Origin json.RawMessage `json:"origin,omitempty"`
}

// Resume is the data of an io.interlock.run.resume event. Only the parts that
// fit the pending interrupt's kind are needed.
type Resume struct {
	ResumeToken        string                     `json:"resumeToken,omitempty"`
	RequestID          string                     `json:"requestId,omitempty"`
	Answers            map[string]json.RawMessage `json:"answers,omitempty"`
	Selected           []string                   `json:"selected,omitempty"`
	Decision           string                     `json:"decision,omitempty"`
	Edits              map[string]json.RawMessage `json:"edits,omitempty"`
	Update             map[string]json.RawMessage `json:"update,omitempty"`
	Approver           string                     `json:"approver,omitempty"`
	Reason             string                     `json:"reason,omitempty"`
	ExpectedCheckpoint *uint64                    `json:"expectedCheckpoint,omitempty"`
	IdempotencyKey     string                     `json:"idempotencyKey,omitempty"`
}

// Cancel is the data of an io.interlock.run.cancel event.
type Cancel struct {
	Reason string `json:"reason,omitempty"`
	// By names who cancelled, for the audit record.
	By string `json:"by,omitempty"`
}

// ParseStart parses start data. Empty data is a start with no initial state.
func ParseStart(data []byte) (Start, error) {
	var s Start
	if isEmpty(data) {
		return s, nil
	}
	if err := decodeStrict(data, &s, "start"); err != nil {
		return Start{}, err
	}
	if string(trimJSON(s.Origin)) == "null" {
		s.Origin = nil
	}
	if len(s.Origin) > 0 && !isObject(s.Origin) {
		return Start{}, invalid("data.origin", "must be a JSON object, such as {\"slack\":{\"channel\":\"C1\"}}")
	}
	return s, nil
}

// Reannounce is the data of an io.interlock.run.reannounce event: announce
// a waiting run's pending interrupt again, with a fresh resume token.
type Reannounce struct {
	// RequestID, if set, must be the pending request's id.
	RequestID string `json:"requestId,omitempty"`
	// Reason is recorded in the audit stream.
	Reason string `json:"reason,omitempty"`
}

// ParseReannounce parses reannounce data. Empty data reannounces whatever
// is pending.
func ParseReannounce(data []byte) (Reannounce, error) {
	var r Reannounce
	if isEmpty(data) {
		return r, nil
	}
	if err := decodeStrict(data, &r, "reannounce"); err != nil {
		return Reannounce{}, err
	}
	return r, nil
}

// ToolRequest is the data of an io.interlock.tool.requested event: an
// agent asks whether it may run a tool call.
type ToolRequest struct {
	// CallID names the call; it is the run id of the gate run when a rule
	// fires, and repeating it never starts a second run.
	CallID string `json:"callId"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Args are the call's arguments, a JSON object.
	Args           map[string]json.RawMessage `json:"args,omitempty"`
	ConversationID string                     `json:"conversationId,omitempty"`
	Agent          string                     `json:"agent,omitempty"`
	// Messages are the conversation so far, for the approver.
	Messages json.RawMessage `json:"messages,omitempty"`
	// Context is any JSON object the rules may read.
	Context json.RawMessage `json:"context,omitempty"`
	// Origin is echoed in every event of the call.
	Origin json.RawMessage `json:"origin,omitempty"`
}

// ParseToolRequest parses tool request data: callId and tool are required;
// context and origin, when given, are objects and messages a list.
func ParseToolRequest(data []byte) (ToolRequest, error) {
	var r ToolRequest
	if isEmpty(data) {
		return r, invalid("data", "is empty; a tool request needs callId, tool and args")
	}
	if err := decodeStrict(data, &r, "tool request"); err != nil {
		return ToolRequest{}, err
	}
	switch {
	case r.CallID == "":
		return ToolRequest{}, invalid("data.callId", "is missing; name the call (it becomes the gate run's id)")
	case r.Tool == "":
		return ToolRequest{}, invalid("data.tool", "is missing; name the tool the agent wants to call")
	case len(r.Context) > 0 && !isObject(r.Context):
		return ToolRequest{}, invalid("data.context", "must be a JSON object")
	case len(r.Origin) > 0 && !isObject(r.Origin):
		return ToolRequest{}, invalid("data.origin", "must be a JSON object")
	case len(r.Messages) > 0 && !bytes.HasPrefix(bytes.TrimSpace(r.Messages), []byte("[")):
		return ToolRequest{}, invalid("data.messages", "must be a JSON list")
	}
	return r, nil
}

// Expire is the data of an io.interlock.run.expire event: the deadline of
// one pending request has passed.
type Expire struct {
	RequestID string `json:"requestId"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Flow and Run repeat the subject's flow and the event's subject.
	Flow string `json:"flow,omitempty"`
	Run  string `json:"run,omitempty"`
}

// ParseExpire parses expire data; requestId is required.
func ParseExpire(data []byte) (Expire, error) {
	var e Expire
	if err := decodeStrict(data, &e, "expire"); err != nil {
		return Expire{}, err
	}
	if e.RequestID == "" {
		return Expire{}, &Error{Reason: ReasonInvalidPayload, Msg: "expire data needs requestId"}
	}
	return e, nil
}

// ParseCancel parses cancel data. Empty data is a cancel with no reason.
func ParseCancel(data []byte) (Cancel, error) {
	var c Cancel
	if isEmpty(data) {
		return c, nil
	}
	if err := decodeStrict(data, &c, "cancel"); err != nil {
		return Cancel{}, err
	}
	return c, nil
}

// ParseResume parses resume data. selected is accepted in its four shapes: a
// string, a list of strings, {"choice":{"id":...}} and
// {"choices":[{"id":...},...]}; Resume.Selected holds the ids.
func ParseResume(data []byte) (Resume, error) {
	var raw struct {
		Resume
		Selected json.RawMessage `json:"selected,omitempty"`
	}
	if isEmpty(data) {
		return Resume{}, invalid("data", "is empty; a resume needs at least a resumeToken and the answer")
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
		return Resume{}, err
	}
	r := raw.Resume
	if len(raw.Selected) > 0 && string(raw.Selected) != "null" {
		ids, err := ParseSelected(raw.Selected)
		if err != nil {
			return Resume{}, err
		}
		r.Selected = ids
	}
	switch r.Decision {
	case "", "approve", "edit", "reject":
	default:
		return Resume{}, invalid("data.decision", "is %q; use one of approve, edit, reject", r.Decision)
	}
	for k := range r.Answers {
		if k == "" {
			return Resume{}, invalid("data.answers", "has an empty field name")
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
