package protocol_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/protocol"
)

func TestEveryKindHasASpec(t *testing.T) {
	if got := protocol.Kinds(); !slices.Equal(got, []string{"question", "choice", "approval"}) {
		t.Fatalf("Kinds() = %v", got)
	}
	for _, k := range protocol.Kinds() {
		s, ok := protocol.SpecOf(k)
		if !ok || s.Kind != k || s.Noun == "" || s.Answers == "" {
			t.Errorf("kind %s: spec %+v", k, s)
		}
	}
	if _, ok := protocol.SpecOf("rating"); ok {
		t.Error("SpecOf an unknown kind says it is known")
	}
	if !protocol.RoleRestricted("approval") || protocol.RoleRestricted("question") || protocol.RoleRestricted("nope") {
		t.Error("RoleRestricted: only an approval is answered by its role")
	}
	if got := protocol.KindsText(); got != "question, choice or approval" {
		t.Errorf("KindsText() = %q", got)
	}
}

func TestEachKindChecksTheShapeOfItsAnswer(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	question := protocol.Asked{Kind: "question", Fields: []string{"email", "name"}}
	choice := protocol.Asked{Kind: "choice", Options: []protocol.Option{{ID: "a"}, {ID: "b"}}}
	several := choice
	several.Multiple = true
	approval := protocol.Asked{Kind: "approval", Action: "refund", Args: raw(`{"amount":4800,"orderId":"o-1"}`),
		Decisions: []protocol.Verdict{"approve", "reject"}, RejectReasonRequired: true}
	open := approval
	open.Decisions, open.RejectReasonRequired = nil, false
	cases := []struct {
		name  string
		asked protocol.Asked
		a     protocol.Answer
		err   string
	}{
		{"answers", question, protocol.Answer{Answers: map[string]json.RawMessage{"email": raw(`"a@b"`)}}, ""},
		{"no answers", question, protocol.Answer{}, "answers is empty; answer one or more of email, name"},
		{"field not asked", question, protocol.Answer{Answers: map[string]json.RawMessage{"phone": raw(`1`)}}, `"phone" is not asked`},
		{"not JSON", question, protocol.Answer{Answers: map[string]json.RawMessage{"email": raw(`{`)}}, "not valid JSON"},
		{"a decision to a question", question, protocol.Answer{Decision: "approve"}, "this interrupt asks questions"},
		{"one option", choice, protocol.Answer{Selected: []string{"a"}}, ""},
		{"two of one", choice, protocol.Answer{Selected: []string{"a", "b"}}, "takes one"},
		{"two of several", several, protocol.Answer{Selected: []string{"a", "b"}}, ""},
		{"twice", several, protocol.Answer{Selected: []string{"a", "a"}}, "selected twice"},
		{"no such option", choice, protocol.Answer{Selected: []string{"z"}}, `"z" is not an option; choose one of a, b`},
		{"nothing", choice, protocol.Answer{}, "nothing selected"},
		{"answers to a choice", choice, protocol.Answer{Answers: map[string]json.RawMessage{"a": raw(`1`)}}, "is a choice"},
		{"approve", approval, protocol.Answer{Decision: "approve"}, ""},
		{"no decision", approval, protocol.Answer{}, "decision is missing; send one of approve, reject"},
		{"not allowed", approval, protocol.Answer{Decision: "edit", Edits: map[string]json.RawMessage{"amount": raw(`1`)}}, `decision "edit" is not allowed here`},
		{"reject without a reason", approval, protocol.Answer{Decision: "reject", Reason: " "}, "needs a reason"},
		{"reject with a reason", approval, protocol.Answer{Decision: "reject", Reason: "duplicate"}, ""},
		{"reject without a reason where none is needed", open, protocol.Answer{Decision: "reject"}, ""},
		{"edits without edit", open, protocol.Answer{Decision: "approve", Edits: map[string]json.RawMessage{"amount": raw(`1`)}}, "edits are taken only with decision edit"},
		{"edit without edits", open, protocol.Answer{Decision: "edit"}, "needs edits"},
		{"edit of no arg", open, protocol.Answer{Decision: "edit", Edits: map[string]json.RawMessage{"note": raw(`1`)}}, `edits name "note"`},
		{"edit", open, protocol.Answer{Decision: "edit", Edits: map[string]json.RawMessage{"amount": raw(`400`)}}, ""},
		{"answers to an approval", open, protocol.Answer{Selected: []string{"a"}}, "is an approval of refund"},
	}
	for _, c := range cases {
		s, _ := protocol.SpecOf(c.asked.Kind)
		err := s.Check(c.asked, c.a)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v, want none", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
		}
	}
}
