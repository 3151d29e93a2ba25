package inbox_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/internal/natstest"
)

// TestAnAskIsAnsweredInTheInbox: an ask made over HTTP shows in the
// queue with its title, its page asks its question with the conversation
// behind it, an answer its schema refuses is shown as refused, and a good
// one settles the ask.
func TestAnAskIsAnsweredInTheInbox(t *testing.T) {
	t.Parallel()
	s := startSite(t, nil)
	ask := map[string]any{"askId": "ask-inbox", "agent": "support-bot", "conversationId": "conv-3",
		"messages": []any{map[string]any{"role": "user", "content": "Please ship it to my office"}},
		"interrupt": map[string]any{"kind": "question", "title": "Delivery address",
			"questions": []any{map[string]any{"field": "address", "question": "Where should we ship it?",
				"schema": map[string]any{"type": "string", "minLength": 10}}}}}
	if code, out := s.api("", "POST", "/v1/asks", ask); code != http.StatusAccepted {
		t.Fatalf("ask = %d %s", code, out)
	}
	local := s.visitor()
	if _, page := local.do("GET", "/", nil); !strings.Contains(page, "Delivery address") || !strings.Contains(page, "ask-inbox") {
		t.Fatalf("the queue does not show the ask:\n%s", page)
	}
	_, page := local.do("GET", "/runs/ask/ask-inbox", nil)
	if !strings.Contains(page, "Where should we ship it?") || !strings.Contains(page, "Please ship it to my office") {
		t.Fatalf("the ask's page shows neither its question nor its conversation:\n%s", page)
	}
	form := hidden(page)
	form.Set("answer.address", "short")
	if code, page := local.do("POST", "/runs/ask/ask-inbox", form); code != http.StatusUnprocessableEntity || !strings.Contains(page, "10") {
		t.Fatalf("a too short address = %d\n%s", code, page)
	}
	_, page = local.do("GET", "/runs/ask/ask-inbox", nil)
	form = hidden(page)
	form.Set("answer.address", "1 Main Street, Springfield")
	if code, page := local.do("POST", "/runs/ask/ask-inbox", form); code != http.StatusOK {
		t.Fatalf("a good address = %d\n%s", code, page)
	}
	var got struct {
		Answered struct {
			Status  string
			Answers map[string]string
		}
	}
	natstest.Eventually(t, "the ask answered", func() bool {
		code, out := s.api("", "GET", "/v1/asks/ask-inbox", nil)
		return code == http.StatusOK && json.Unmarshal(out, &got) == nil
	})
	if got.Answered.Status != "answered" || got.Answered.Answers["address"] != "1 Main Street, Springfield" {
		t.Fatalf("answered = %+v", got)
	}
}
