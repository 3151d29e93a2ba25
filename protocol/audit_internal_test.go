package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// sameHash checks that CanonicalHash hashes obj as decoding it into a map
// and encoding that does, or fails as that does.
func sameHash(t *testing.T, obj []byte) {
	t.Helper()
	got, gotErr := CanonicalHash(obj)
	want, wantErr := canonicalHashDecoded(obj)
	if got != want || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: CanonicalHash %s (%v), decoded %s (%v)", obj, got, gotErr, want, wantErr)
	}
}

func TestCanonicalHashIsTheDecodedObjects(t *testing.T) {
	for _, obj := range []string{
		`{}`, ` {"b":1,"a":2} `, `{"hash":"x","a":1}`, `{"a":{"hash":"kept","b":[1,{"d":1,"c":2}]}}`,
		`{"a":1,"a":2}`, `{"hash":1,"hash":2,"z":[]}`, `{"\u0061":"\u00e9<>&\u2028","b":"\ud800"}`, "{\"a\":\"\xff\"}",
		`{"n":[-0,1E5,1.50e-3,12345678901234567890123]}`, `{"s":"\"\\\/\b\f\n\r\t"}`, `{"t":true,"f":false,"n":null}`,
		`{ "a" : [ 1 , 2 ] , "b" : { } }`, `{"é":1,"e":2,"E":3,"":4}`,
		`[1]`, `null`, `"a"`, `{"a":1} x`, `{"a":1`, ``, `{"a":1}{}`,
		`{"a":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
		`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	} {
		sameHash(t, []byte(obj))
	}
}

// FuzzCanonicalHash holds CanonicalHash to decoding the object into a map
// and encoding it again.
func FuzzCanonicalHash(f *testing.F) {
	f.Add([]byte(`{"flow":"refund","run":"r-42","action":"edited","at":"2026-11-21T10:00:00Z","approval":{"action":"issue_refund","args":{"orderId":"o-1","amount":4800}},"seq":5,"prev":"4f0c","hash":"9a1e"}`))
	f.Add([]byte(`{"a":{"hash":"kept","b":[1,{"d":1,"c":2}]},"a":[]}`))
	f.Add([]byte(`{"\u0061":"\u00e9<>&\u2028","b":"\ud800"}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		sameHash(t, obj)
	})
}

func TestAuditHashIsTheCanonicalHashOfTheRecord(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, rec := range []*AuditRecord{
		{Flow: "f", Run: "r", Action: ActionStarted, At: at, Seq: 1, Hash: "ignored"},
		{Flow: "f", Run: "r", Action: ActionEdited, At: at, By: "ann <a&b>", Reason: "\xff\u2028é", ApproverRole: "supervisor", ExpiresAt: &at,
			Approval: &AuditApproval{Action: "pay", Args: json.RawMessage(`{"z":1,"a":{"y":[2,1],"b":"\u00e9"},"a":0}`), Edits: json.RawMessage(` { "b" : 1e5 } `)},
			Outcome:  &AuditOutcome{Status: StatusWaiting, Node: "n", RequestID: "rq", Kind: KindApproval}, Seq: 3, Prev: "p", Side: true, Trusted: true, Timeout: true},
	} {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonicalHashDecoded(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := AuditHash(rec); err != nil || got != want {
			t.Errorf("AuditHash(%s) = %s, %v; want %s", b, got, err, want)
		}
	}
}

// TestAuditHashOfARecordWithoutKidIsUnchanged pins the hashes of two
// records as Interlock computed them before it signed audit records:
// records already in the stream keep verifying. Adding a kid changes the
// hash (the hash covers it); adding a sig does not (the sig is over the
// hash).
func TestAuditHashOfARecordWithoutKidIsUnchanged(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	exp := at.Add(30 * time.Minute)
	edited := &AuditRecord{Flow: "refund", Run: "r-42", Action: ActionEdited, At: at, By: "sam@example.com", Source: "/slack/approvals", EventID: "ev-7",
		Node: "review", RequestID: "rq_7", Kind: KindApproval, Reason: "Partial refund <agreed> & é", ApproverRole: "supervisor", ExpiresAt: &exp,
		Approval: &AuditApproval{Action: "issue_refund", Args: json.RawMessage(`{"orderId":"o-1","amount":4800.50}`), Edits: json.RawMessage(`{"amount":400}`), Final: json.RawMessage(`{"amount":400,"orderId":"o-1"}`)},
		Outcome:  &AuditOutcome{Status: StatusCompleted, Node: "issue_refund"}, Seq: 5, Prev: "4f0c9e2a4f0c9e2a4f0c9e2a4f0c9e2a4f0c9e2a4f0c9e2a4f0c9e2a4f0c9e2a"}
	refused := &AuditRecord{Flow: "refund", Run: "r-42", Action: ActionRefused, At: at, By: "sam", Code: CodeInvalidAnswer, Reason: "no", Side: true, Prev: "ab"}
	for _, tc := range []struct {
		rec  *AuditRecord
		want string
	}{
		{edited, "c703989b6d112a599ca85f5ca2d61ea7c7995281b5abd58358a2b74414e83de1"},
		{refused, "44e549e4203a22aafd10e36a1fd014d720084f97f3ea8eed6fa2796d3a83cb7e"},
	} {
		if got, err := AuditHash(tc.rec); err != nil || got != tc.want {
			t.Errorf("%s record: hash %s (%v), want %s as before records were signed", tc.rec.Action, got, err, tc.want)
		}
		signed := *tc.rec
		signed.Sig = "clpjrTcumzryd6QmYoQn1ct4dbvs5L/5P6zMtaM4qvze+85uW/mtjnFWThsiekFjKiLBKxYVOEA5/DCu8qKenw=="
		if got, _ := AuditHash(&signed); got != tc.want {
			t.Errorf("%s record: a sig changed the hash to %s", tc.rec.Action, got)
		}
		signed.Kid = "5b0e7c1d9a3f2e48"
		if got, _ := AuditHash(&signed); got == tc.want {
			t.Errorf("%s record: a kid left the hash as it was; the hash must cover the key's id", tc.rec.Action)
		}
	}
}

// TestAPauseIsARecordWhoseTransitionRanNodesAndLeftTheRunWaiting checks
// which records Paused takes for a pause: those of a start, an answer or
// a decision that left the run waiting, not those of a transition on the
// pending interrupt, which also name it in their outcome.
func TestAPauseIsARecordWhoseTransitionRanNodesAndLeftTheRunWaiting(t *testing.T) {
	waiting := &AuditOutcome{Status: StatusWaiting, Node: "review", RequestID: "rq_2", Kind: KindApproval}
	for _, tc := range []struct {
		action  string
		outcome *AuditOutcome
		want    bool
	}{
		{ActionStarted, waiting, true},
		{ActionAnswered, waiting, true},
		{ActionApproved, waiting, true},
		{ActionEdited, waiting, true},
		{ActionRejected, waiting, true},
		{ActionResponded, waiting, true},
		{ActionAnswered, &AuditOutcome{Status: StatusCompleted, Node: "done"}, false},
		{ActionAnswered, &AuditOutcome{Status: StatusWaiting, Node: "review"}, false},
		{ActionStarted, nil, false},
		{ActionVoted, waiting, false},
		{ActionClaimed, waiting, false},
		{ActionReminded, waiting, false},
		{ActionReannounced, waiting, false},
		{ActionEscalated, waiting, false},
		{ActionInterrupted, waiting, false},
	} {
		if got := (AuditRecord{Action: tc.action, Outcome: tc.outcome}).Paused(); got != tc.want {
			t.Errorf("a %s record with outcome %+v: Paused() = %t, want %t", tc.action, tc.outcome, got, tc.want)
		}
	}
}
