package protocol

import (
	"encoding/json"
	"strings"
)

// GateFlow is the built-in flow of the tool-call gate: one run per call,
// whose run id is the call's id (§4).
const GateFlow = "gate"

// Conversation is what led an agent to ask: the request's
// conversationId, agent, messages and context, which a run of the gate
// flow keeps in its state and an approver is shown.
type Conversation struct {
	ID    string
	Agent string
	// Messages are the request's messages, oldest first.
	Messages []Message
	// Context is the request's context object, if any.
	Context json.RawMessage
}

// Message is one message of a conversation, as a person reads it.
type Message struct {
	// Role is who spoke ("user", "assistant", "tool", ...), when the
	// message says.
	Role string
	// Text is what was said: the message's content when it is text or a
	// list of text parts, else the message as compact JSON.
	Text string
}

// Conversation returns the conversation behind a gate run's request or
// an ask,
// from the run's state, and false when the run is not a gate run or its
// request came with no conversation.
func (cp Checkpoint) Conversation() (Conversation, bool) {
	if cp.Flow != GateFlow && cp.Flow != AskFlow {
		return Conversation{}, false
	}
	var s struct {
		ConversationID string          `json:"conversationId"`
		Agent          string          `json:"agent"`
		Messages       json.RawMessage `json:"messages"`
		Context        json.RawMessage `json:"context"`
	}
	if json.Unmarshal(cp.State, &s) != nil {
		return Conversation{}, false
	}
	c := Conversation{ID: s.ConversationID, Agent: s.Agent, Messages: Messages(s.Messages)}
	if JSONTypeOf(s.Context) == JSONObject && compactJSON(s.Context) != "{}" {
		c.Context = s.Context
	}
	if c.ID == "" && len(c.Messages) == 0 && c.Context == nil {
		return Conversation{}, false
	}
	return c, true
}

// Messages reads a request's messages (a JSON array) for a person. A
// message is read as the common chat formats write it: an object with
// role and content, content being text or a list of parts of which the
// text ones are kept; anything else is shown as compact JSON.
func Messages(raw json.RawMessage) []Message {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	out := make([]Message, 0, len(list))
	for _, m := range list {
		var obj struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if JSONTypeOf(m) == JSONString {
			out = append(out, Message{Text: plainText(m)})
			continue
		}
		if json.Unmarshal(m, &obj) != nil {
			out = append(out, Message{Text: compactJSON(m)})
			continue
		}
		text, ok := contentText(obj.Content)
		if !ok {
			text = compactJSON(m)
		}
		out = append(out, Message{Role: obj.Role, Text: text})
	}
	return out
}

// contentText is a message's content as text: a string, or the text of
// a list of parts ({"type": "text", "text": ...}).
func contentText(content json.RawMessage) (string, bool) {
	switch JSONTypeOf(content) {
	case JSONString:
		return plainText(content), true
	case JSONArray:
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(content, &parts) != nil {
			return "", false
		}
		var texts []string
		for _, p := range parts {
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		if len(texts) == 0 {
			return "", false
		}
		return strings.Join(texts, "\n"), true
	}
	return "", false
}
