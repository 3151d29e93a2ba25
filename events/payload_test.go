package events_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

func TestParseStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		data       string
		wantErr    bool
		wantField  string
		wantMsg    string // part of the error message
		wantState  []string
		wantOrigin string
	}{
		{name: "empty data", data: ""},
		{name: "null", data: "null"},
		{name: "white space", data: " \n"},
		{name: "empty object", data: "{}"},
		{name: "state", data: `{"state":{"name":"Ann","age":41}}`, wantState: []string{"age", "name"}},
		{name: "origin object", data: `{"origin":{"slack":{"channel":"C1","threadTs":"171.2"}}}`,
			wantOrigin: `{"slack":{"channel":"C1","threadTs":"171.2"}}`},
		{name: "state and origin", data: `{"state":{"x":null},"origin":{}}`, wantState: []string{"x"}, wantOrigin: `{}`},
		{name: "origin null is no origin", data: `{"origin":null}`},
		{name: "origin a string", data: `{"origin":"slack"}`, wantErr: true, wantField: "data.origin"},
		{name: "origin a list", data: `{"origin":[1]}`, wantErr: true, wantField: "data.origin"},
		{name: "state a list", data: `{"state":[1,2]}`, wantErr: true, wantField: "data.state", wantMsg: "must be an object"},
		{name: "state a string", data: `{"state":"x"}`, wantErr: true, wantField: "data.state"},
		{name: "unknown field", data: `{"stat":{}}`, wantErr: true, wantField: "data", wantMsg: `"stat"`},
		{name: "not an object", data: `[1]`, wantErr: true, wantField: "data"},
		{name: "a string", data: `"go"`, wantErr: true, wantField: "data"},
		{name: "trailing content", data: `{} {}`, wantErr: true, wantField: "data", wantMsg: "trailing"},
		{name: "broken JSON", data: `{"state":`, wantErr: true, wantField: "data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := events.ParseStart([]byte(tc.data))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseStart(%s) accepted: %+v", tc.data, s)
				}
				wantEventError(t, err, events.ReasonInvalidPayload, tc.wantField)
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStart(%s): %v", tc.data, err)
			}
			var keys []string
			for k := range s.State {
				keys = append(keys, k)
			}
			if !sameSet(keys, tc.wantState) {
				t.Errorf("state keys = %v, want %v", keys, tc.wantState)
			}
			if string(s.Origin) != tc.wantOrigin {
				t.Errorf("origin = %s, want %s", s.Origin, tc.wantOrigin)
			}
		})
	}
}

func TestParseCancel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		data      string
		want      protocol.Cancel
		wantErr   bool
		wantField string
	}{
		{name: "empty data", data: ""},
		{name: "null", data: "null"},
		{name: "empty object", data: "{}"},
		{name: "reason and by", data: `{"reason":"customer left","by":"ann@example.com"}`,
			want: protocol.Cancel{Reason: "customer left", By: "ann@example.com"}},
		{name: "reason a number", data: `{"reason":5}`, wantErr: true, wantField: "data.reason"},
		{name: "unknown field", data: `{"why":"x"}`, wantErr: true, wantField: "data"},
		{name: "a string", data: `"now"`, wantErr: true, wantField: "data"},
		{name: "trailing content", data: `{}x`, wantErr: true, wantField: "data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := events.ParseCancel([]byte(tc.data))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseCancel(%s) accepted: %+v", tc.data, c)
				}
				wantEventError(t, err, events.ReasonInvalidPayload, tc.wantField)
				return
			}
			if err != nil {
				t.Fatalf("ParseCancel(%s): %v", tc.data, err)
			}
			if c != tc.want {
				t.Errorf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

func TestParseResumeReadsEveryField(t *testing.T) {
	t.Parallel()
	data := `{
		"resumeToken": "tok-1", "requestId": "rq_01J",
		"answers": {"email": "ann@example.com", "driver.name": "Ann"},
		"selected": ["product"],
		"decision": "edit", "edits": {"amount": 400},
		"update": {"notes": ["checked with finance"]},
		"approver": "ann@example.com", "reason": "Verified against ticket 4821",
		"expectedCheckpoint": 7, "idempotencyKey": "c2f5e8a0"
	}`
	r, err := events.ParseResume([]byte(data))
	if err != nil {
		t.Fatalf("ParseResume: %v", err)
	}
	strs := []struct{ name, got, want string }{
		{"resumeToken", r.ResumeToken, "tok-1"},
		{"requestId", r.RequestID, "rq_01J"},
		{"decision", r.Decision, "edit"},
		{"approver", r.Approver, "ann@example.com"},
		{"reason", r.Reason, "Verified against ticket 4821"},
		{"idempotencyKey", r.IdempotencyKey, "c2f5e8a0"},
		{"answers.email", string(r.Answers["email"]), `"ann@example.com"`},
		{"answers.driver.name", string(r.Answers["driver.name"]), `"Ann"`},
		{"edits.amount", string(r.Edits["amount"]), `400`},
		{"update.notes", string(r.Update["notes"]), `["checked with finance"]`},
	}
	for _, s := range strs {
		if s.got != s.want {
			t.Errorf("%s = %q, want %q", s.name, s.got, s.want)
		}
	}
	if !reflect.DeepEqual(r.Selected, []string{"product"}) {
		t.Errorf("selected = %q, want [product]", r.Selected)
	}
	if r.ExpectedCheckpoint == nil || *r.ExpectedCheckpoint != 7 {
		t.Errorf("expectedCheckpoint = %v, want 7", r.ExpectedCheckpoint)
	}
}

func TestParseResume(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		data         string
		wantErr      bool
		wantField    string
		wantMsg      string // part of the error message
		wantSelected []string
		wantDecision string
		wantExpected *uint64
	}{
		{name: "token only", data: `{"resumeToken":"t"}`},
		{name: "selected a string", data: `{"selected":"a"}`, wantSelected: []string{"a"}},
		{name: "selected a list", data: `{"selected":["a","b"]}`, wantSelected: []string{"a", "b"}},
		{name: "selected a choice", data: `{"selected":{"choice":{"id":"a"}}}`, wantSelected: []string{"a"}},
		{name: "selected choices", data: `{"selected":{"choices":[{"id":"a"},{"id":"b"}]}}`, wantSelected: []string{"a", "b"}},
		{name: "selected null", data: `{"selected":null}`},
		{name: "decision approve", data: `{"decision":"approve"}`, wantDecision: "approve"},
		{name: "decision edit", data: `{"decision":"edit","edits":{"amount":1}}`, wantDecision: "edit"},
		{name: "decision reject", data: `{"decision":"reject","reason":"no"}`, wantDecision: "reject"},
		{name: "decision respond", data: `{"decision":"respond","message":"Ask for the receipt first."}`, wantDecision: "respond"},
		{name: "expectedCheckpoint zero", data: `{"expectedCheckpoint":0}`, wantExpected: new(uint64(0))},
		{name: "expectedCheckpoint large", data: `{"expectedCheckpoint":18446744073709551615}`, wantExpected: new(uint64(18446744073709551615))},
		{name: "expectedCheckpoint null", data: `{"expectedCheckpoint":null}`},
		{name: "answer values of any JSON type", data: `{"answers":{"a":1,"b":null,"c":[1],"d":{"e":true}}}`},

		{name: "empty data", data: ``, wantErr: true, wantField: "data", wantMsg: "empty"},
		{name: "null", data: `null`, wantErr: true, wantField: "data", wantMsg: "empty"},
		{name: "not an object", data: `["a"]`, wantErr: true, wantField: "data", wantMsg: "object"},
		{name: "unknown field", data: `{"anwsers":{}}`, wantErr: true, wantField: "data", wantMsg: `"anwsers"`},
		{name: "unknown field in snake case", data: `{"resume_token":"t"}`, wantErr: true, wantField: "data", wantMsg: `"resume_token"`},
		{name: "trailing content", data: `{"resumeToken":"t"} {"resumeToken":"u"}`, wantErr: true, wantField: "data", wantMsg: "trailing"},
		{name: "broken JSON", data: `{"resumeToken":`, wantErr: true, wantField: "data"},
		{name: "answers a number", data: `{"answers":5}`, wantErr: true, wantField: "data.answers", wantMsg: "must be an object"},
		{name: "answers a list", data: `{"answers":["a"]}`, wantErr: true, wantField: "data.answers", wantMsg: "must be an object"},
		{name: "answers with an empty field name", data: `{"answers":{"":"x"}}`, wantErr: true, wantField: "data.answers", wantMsg: "empty field name"},
		{name: "edits a string", data: `{"edits":"amount=400"}`, wantErr: true, wantField: "data.edits", wantMsg: "must be an object"},
		{name: "update a list", data: `{"update":[1]}`, wantErr: true, wantField: "data.update", wantMsg: "must be an object"},
		{name: "resumeToken a number", data: `{"resumeToken":5}`, wantErr: true, wantField: "data.resumeToken", wantMsg: "must be a string"},
		{name: "requestId an object", data: `{"requestId":{}}`, wantErr: true, wantField: "data.requestId", wantMsg: "must be a string"},
		{name: "decision a bool", data: `{"decision":true}`, wantErr: true, wantField: "data.decision", wantMsg: "must be a string"},
		{name: "approver a list", data: `{"approver":["a"]}`, wantErr: true, wantField: "data.approver"},
		{name: "reason a number", data: `{"reason":1}`, wantErr: true, wantField: "data.reason"},
		{name: "idempotencyKey a number", data: `{"idempotencyKey":1}`, wantErr: true, wantField: "data.idempotencyKey"},
		{name: "expectedCheckpoint negative", data: `{"expectedCheckpoint":-1}`, wantErr: true, wantField: "data.expectedCheckpoint", wantMsg: "non-negative whole number"},
		{name: "expectedCheckpoint fractional", data: `{"expectedCheckpoint":7.5}`, wantErr: true, wantField: "data.expectedCheckpoint", wantMsg: "non-negative whole number"},
		{name: "expectedCheckpoint a string", data: `{"expectedCheckpoint":"7"}`, wantErr: true, wantField: "data.expectedCheckpoint", wantMsg: "non-negative whole number"},
		{name: "expectedCheckpoint too large", data: `{"expectedCheckpoint":18446744073709551616}`, wantErr: true, wantField: "data.expectedCheckpoint"},
		{name: "decision unknown", data: `{"decision":"approved"}`, wantErr: true, wantField: "data.decision", wantMsg: "approve, edit, reject"},
		{name: "decision in capitals", data: `{"decision":"APPROVE"}`, wantErr: true, wantField: "data.decision"},
		{name: "selected empty string", data: `{"selected":""}`, wantErr: true, wantField: "data.selected"},
		{name: "selected a number", data: `{"selected":5}`, wantErr: true, wantField: "data.selected"},
		{name: "selected list with an empty id", data: `{"selected":["a",""]}`, wantErr: true, wantField: "data.selected[1]"},
		{name: "selected both choice and choices", data: `{"selected":{"choice":{"id":"a"},"choices":[{"id":"b"}]}}`, wantErr: true, wantField: "data.selected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := events.ParseResume([]byte(tc.data))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseResume(%s) accepted: %+v", tc.data, r)
				}
				wantEventError(t, err, events.ReasonInvalidPayload, tc.wantField)
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseResume(%s): %v", tc.data, err)
			}
			if !reflect.DeepEqual(r.Selected, tc.wantSelected) {
				t.Errorf("selected = %q, want %q", r.Selected, tc.wantSelected)
			}
			if r.Decision != tc.wantDecision {
				t.Errorf("decision = %q, want %q", r.Decision, tc.wantDecision)
			}
			if !reflect.DeepEqual(r.ExpectedCheckpoint, tc.wantExpected) {
				t.Errorf("expectedCheckpoint = %v, want %v", r.ExpectedCheckpoint, tc.wantExpected)
			}
		})
	}
}

func TestParseResumeAcceptsWhatItEncodes(t *testing.T) {
	t.Parallel()
	want := protocol.Resume{
		ResumeToken: "tok", RequestID: "rq", Selected: []string{"a", "b"},
		Answers:  map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
		Decision: "reject", Approver: "ann", Reason: "no", IdempotencyKey: "k",
		ExpectedCheckpoint: new(uint64(3)),
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.ParseResume(b)
	if err != nil {
		t.Fatalf("ParseResume(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip of %s gave %+v, want %+v", b, got, want)
	}
}

func TestParseSelected(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		raw       string
		want      []string
		wantErr   bool
		wantField string
		wantMsg   string
	}{
		{name: "a string", raw: `"a"`, want: []string{"a"}},
		{name: "a string with white space around it", raw: " \"a\"\n", want: []string{"a"}},
		{name: "a string with escapes", raw: `"caf\u00e9"`, want: []string{"café"}},
		{name: "a list", raw: `["a","b"]`, want: []string{"a", "b"}},
		{name: "a list of one", raw: `["a"]`, want: []string{"a"}},
		{name: "an empty list", raw: `[]`, want: []string{}},
		{name: "a choice", raw: `{"choice":{"id":"a"}}`, want: []string{"a"}},
		{name: "a choice with its label", raw: `{"choice":{"id":"a","label":"Option A"}}`, want: []string{"a"}},
		{name: "choices", raw: `{"choices":[{"id":"a"}]}`, want: []string{"a"}},
		{name: "several choices", raw: `{"choices":[{"id":"a"},{"id":"b","label":"B"}]}`, want: []string{"a", "b"}},
		{name: "choice with choices null", raw: `{"choice":{"id":"a"},"choices":null}`, want: []string{"a"}},

		{name: "nothing", raw: ``, wantErr: true, wantField: "data.selected", wantMsg: "empty"},
		{name: "white space", raw: "  ", wantErr: true, wantField: "data.selected", wantMsg: "empty"},
		{name: "empty id", raw: `""`, wantErr: true, wantField: "data.selected", wantMsg: "empty option id"},
		{name: "blank id", raw: `" \t"`, wantErr: true, wantField: "data.selected", wantMsg: "empty option id"},
		{name: "unterminated string", raw: `"a`, wantErr: true, wantField: "data.selected"},
		{name: "string followed by more", raw: `"a" "b"`, wantErr: true, wantField: "data.selected"},
		{name: "empty id in a list", raw: `["a",""]`, wantErr: true, wantField: "data.selected[1]", wantMsg: "empty option id"},
		{name: "null in a list", raw: `[null]`, wantErr: true, wantField: "data.selected[0]"},
		{name: "number in a list", raw: `["a",1]`, wantErr: true, wantField: "data.selected", wantMsg: "list of option ids"},
		{name: "nested list", raw: `[["a"]]`, wantErr: true, wantField: "data.selected"},
		{name: "both choice and choices", raw: `{"choice":{"id":"a"},"choices":[{"id":"b"}]}`, wantErr: true, wantField: "data.selected", wantMsg: "both"},
		{name: "choice without id", raw: `{"choice":{}}`, wantErr: true, wantField: "data.selected.choice.id", wantMsg: "missing"},
		{name: "choice with null id", raw: `{"choice":{"id":null}}`, wantErr: true, wantField: "data.selected.choice.id", wantMsg: "missing"},
		{name: "choice with empty id", raw: `{"choice":{"id":""}}`, wantErr: true, wantField: "data.selected.choice.id", wantMsg: "empty option id"},
		{name: "choice with a number id", raw: `{"choice":{"id":1}}`, wantErr: true, wantField: "data.selected"},
		{name: "choice a string", raw: `{"choice":"a"}`, wantErr: true, wantField: "data.selected"},
		{name: "choices an object", raw: `{"choices":{"id":"a"}}`, wantErr: true, wantField: "data.selected"},
		{name: "choices with a missing id", raw: `{"choices":[{"id":"a"},{}]}`, wantErr: true, wantField: "data.selected.choices[1].id", wantMsg: "missing"},
		{name: "choices with an empty id", raw: `{"choices":[{"id":" "}]}`, wantErr: true, wantField: "data.selected.choices[0].id", wantMsg: "empty option id"},
		{name: "empty object", raw: `{}`, wantErr: true, wantField: "data.selected"},
		{name: "choice null", raw: `{"choice":null}`, wantErr: true, wantField: "data.selected"},
		{name: "an object of something else", raw: `{"id":"a"}`, wantErr: true, wantField: "data.selected"},
		{name: "number", raw: `5`, wantErr: true, wantField: "data.selected"},
		{name: "true", raw: `true`, wantErr: true, wantField: "data.selected"},
		{name: "null", raw: `null`, wantErr: true, wantField: "data.selected"},
		{name: "nested garbage", raw: `{"choice":{"id":["a",{"b":[}]}}`, wantErr: true, wantField: "data.selected"},
		{name: "unterminated list", raw: `["a"`, wantErr: true, wantField: "data.selected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids, err := events.ParseSelected(json.RawMessage(tc.raw))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseSelected(%s) accepted: %q", tc.raw, ids)
				}
				wantEventError(t, err, events.ReasonInvalidPayload, tc.wantField)
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not say %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSelected(%s): %v", tc.raw, err)
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("ParseSelected(%s) = %q, want %q", tc.raw, ids, tc.want)
			}
		})
	}
}

func TestInterruptedFieldsInOrder(t *testing.T) {
	t.Parallel()
	in := protocol.Interrupted{Questions: []protocol.Question{{Field: "name"}, {Field: "driver.email"}}}
	if got := in.Fields(); !reflect.DeepEqual(got, []string{"name", "driver.email"}) {
		t.Errorf("Fields() = %q", got)
	}
	if got := (protocol.Interrupted{}).Fields(); len(got) != 0 {
		t.Errorf("Fields() of no questions = %q", got)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
