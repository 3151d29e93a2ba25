package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ReceiptTTL is how long a decision's receipt authorizes what it decides:
// an agent runs an approved call within it, or asks again.
const ReceiptTTL = 24 * time.Hour

// ReceiptType is the typ of a receipt's JWS header.
const ReceiptType = "interlock-receipt+jws"

// Outcomes a receipt states: what was decided.
const (
	ReceiptAllowed   = "allowed"
	ReceiptApproved  = "approved"
	ReceiptEdited    = "edited"
	ReceiptRejected  = "rejected"
	ReceiptResponded = "responded"
	ReceiptExpired   = "expired"
	ReceiptAnswered  = "answered"
	ReceiptCancelled = "cancelled"
)

// Receipt is a decision's receipt: a statement, signed with the
// deployment's audit key (Ed25519), of what was decided about exactly what,
// by whom, how they were authenticated, when, and until when it holds. It
// travels as a compact JWS (RFC 7515, alg EdDSA of RFC 8037, kid the audit
// key's id): base64url(header) "." base64url(payload) "." base64url(signature
// over the first two parts as written), so that anyone holding the public
// key verifies it offline, in any language. Decided, answered and resumed
// events carry it (field receipt).
type Receipt struct {
	// V is the receipt's version, 1.
	V int `json:"v"`
	// Flow, Run and RequestID name the interrupt decided.
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId,omitempty"`
	// Kind is the interrupt's kind; "" for a tool call the gate allowed
	// without asking anyone.
	Kind string `json:"kind"`
	// Tool and Server name what an approval proposes (a tool call's tool,
	// a flow's action), and ArgsDigest the args it was asked about
	// ([ArgsDigest]).
	Tool       string `json:"tool,omitempty"`
	Server     string `json:"server,omitempty"`
	ArgsDigest string `json:"argsDigest,omitempty"`
	// Decision is what was decided: allowed (a tool call no rule held),
	// approved, edited, rejected, responded, expired, answered or
	// cancelled.
	Decision string `json:"decision"`
	// FinalDigest is the digest of the args to run, for approved and
	// edited.
	FinalDigest string `json:"finalDigest,omitempty"`
	// AnswerDigest is, for a question or a choice, the digest of the
	// answer: of {"answers": {...}}, or of {"selected": [...]}.
	AnswerDigest string `json:"answerDigest,omitempty"`
	// Approver is who decided, Auth how they were authenticated, and
	// Voters every approver of a quorum's decision.
	Approver string     `json:"approver,omitempty"`
	Auth     AuthMethod `json:"auth,omitempty"`
	Voters   []string   `json:"voters,omitempty"`
	// Rule is the gate rule that held a tool call.
	Rule string `json:"rule,omitempty"`
	// At is when it was decided; Expires when the receipt stops
	// authorizing it.
	At      time.Time `json:"at"`
	Expires time.Time `json:"expires"`
}

// receiptHeader is a receipt's JWS protected header.
type receiptHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// SignReceipt returns r as a compact JWS signed with priv, whose public
// key has id kid.
func SignReceipt(kid string, priv ed25519.PrivateKey, r Receipt) (string, error) {
	r.V = 1
	h, err := json.Marshal(receiptHeader{Alg: "EdDSA", Kid: kid, Typ: ReceiptType})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("protocol: encoding a receipt: %w", err)
	}
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(signing))), nil
}

// Errors of [VerifyReceipt].
var (
	// ErrReceiptInvalid: the receipt is not one the deployment signed, or
	// not a receipt at all.
	ErrReceiptInvalid = errors.New("protocol: the receipt does not verify")
	// ErrReceiptExpired: the receipt verified, but its time has passed.
	ErrReceiptExpired = errors.New("protocol: the receipt has expired")
)

// VerifyReceipt checks a receipt against keys (audit public keys by kid) at
// now and returns what it states: it fails with ErrReceiptInvalid unless it
// is a compact JWS of alg EdDSA, typ [ReceiptType], signed by the key its
// kid names, of version 1; and with ErrReceiptExpired once Expires has
// passed (the receipt is returned too).
func VerifyReceipt(keys map[string]ed25519.PublicKey, jws string, now time.Time) (Receipt, error) {
	parts := strings.Split(strings.TrimSpace(jws), ".")
	if len(parts) != 3 {
		return Receipt{}, fmt.Errorf("%w: it is not base64url(header).base64url(payload).base64url(signature)", ErrReceiptInvalid)
	}
	var h receiptHeader
	if err := decodePart(parts[0], &h); err != nil || h.Alg != "EdDSA" || h.Typ != ReceiptType {
		return Receipt{}, fmt.Errorf("%w: its header is not {\"alg\":\"EdDSA\",\"kid\",\"typ\":%q}", ErrReceiptInvalid, ReceiptType)
	}
	pub, ok := keys[h.Kid]
	if !ok {
		return Receipt{}, fmt.Errorf("%w: it is signed with key %q, which is not among the deployment's audit keys", ErrReceiptInvalid, Truncate(h.Kid, 32))
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return Receipt{}, fmt.Errorf("%w: its signature is not key %s's over its header and payload", ErrReceiptInvalid, h.Kid)
	}
	var r Receipt
	if err := decodePart(parts[1], &r); err != nil || r.V != 1 {
		return Receipt{}, fmt.Errorf("%w: its payload is not a receipt of version 1", ErrReceiptInvalid)
	}
	if !now.Before(r.Expires) {
		return r, fmt.Errorf("%w: it held until %s", ErrReceiptExpired, r.Expires.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// ReceiptKid returns the kid a receipt's header names, unverified: which
// audit key to verify it with.
func ReceiptKid(jws string) string {
	head, _, _ := strings.Cut(strings.TrimSpace(jws), ".")
	var h receiptHeader
	if decodePart(head, &h) != nil {
		return ""
	}
	return h.Kid
}

// decodePart decodes a base64url JWS part holding JSON into v.
func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("protocol: data after the part's JSON object")
	}
	return nil
}

// DecidedOutcome is the outcome a receipt states for a verdict (approve ->
// approved), or the verdict itself when it is none of the four.
func DecidedOutcome(v Verdict) string {
	switch v {
	case VerdictApprove:
		return ReceiptApproved
	case VerdictEdit:
		return ReceiptEdited
	case VerdictReject:
		return ReceiptRejected
	case VerdictRespond:
		return ReceiptResponded
	}
	return string(v)
}

// CheckDecided checks that the receipt states d, the gate's decision about
// the call it answers: the same call (flow gate, run = callId, tool,
// server, args digest), decision and final args digest. An agent runs a
// call only on a decision whose receipt verifies and so checks.
func (r Receipt) CheckDecided(d Decided) error {
	switch {
	case r.Flow != GateFlow || r.Run != d.CallID:
		return fmt.Errorf("protocol: the receipt is of %s %s, not of call %s", r.Flow, r.Run, d.CallID)
	case r.Tool != d.Tool || r.Server != d.Server:
		return fmt.Errorf("protocol: the receipt is of a call of %s, not of %s", r.Tool, d.Tool)
	case r.ArgsDigest != d.ArgsDigest:
		return fmt.Errorf("protocol: the receipt is about other args (digest %.12s, the decision's %.12s)", r.ArgsDigest, d.ArgsDigest)
	case r.Decision != d.Decision:
		return fmt.Errorf("protocol: the receipt states %s, the decision %s", r.Decision, d.Decision)
	case r.FinalDigest != d.FinalDigest:
		return fmt.Errorf("protocol: the receipt states the args of digest %.12s to run, the decision those of %.12s", r.FinalDigest, d.FinalDigest)
	}
	if d.Decision != DecidedApproved && d.Decision != DecidedEdited {
		return nil
	}
	// The args the call runs with are the decision's own: they must be
	// those the receipt states.
	if len(bytes.TrimSpace(d.Args)) == 0 {
		return fmt.Errorf("protocol: the %s decision carries no args to run; run nothing", d.Decision)
	}
	got, err := RawArgsDigest(d.Args)
	if err != nil {
		return fmt.Errorf("protocol: the decision's args: %w", err)
	}
	if got != r.FinalDigest {
		return fmt.Errorf("protocol: the decision's args (digest %.12s) are not those the receipt states to run (%.12s)", got, r.FinalDigest)
	}
	return nil
}

// AnswerDigest is the digest a receipt states of an answer to a question
// (answers) or to a choice (selected): [ArgsDigest] of {"answers": ...}
// or of {"selected": [...]}.
func AnswerDigest(answers map[string]json.RawMessage, selected []string) (string, error) {
	var b []byte
	var err error
	if selected != nil {
		b, err = json.Marshal(map[string][]string{"selected": selected})
	} else {
		if answers == nil {
			answers = map[string]json.RawMessage{}
		}
		b, err = json.Marshal(map[string]map[string]json.RawMessage{"answers": answers})
	}
	if err != nil {
		return "", err
	}
	return RawArgsDigest(b)
}

// HeaderReceipt is the header an ask's callback POST carries the
// answered event's receipt in (as its body does, in receipt).
const HeaderReceipt = "Interlock-Receipt"

// CheckAnswered checks that the receipt states a, how an ask settled: the
// same ask, kind and outcome, and the digest of the same answer (the
// answers, the choice, or an approval's final args). A callback's
// receiver believes a POST only when its receipt verifies and so checks.
func (r Receipt) CheckAnswered(a Answered) error {
	want := a.Status
	if a.Status == AskAnswered {
		want = ReceiptAnswered
		if a.Kind == KindApproval {
			want = DecidedOutcome(a.Decision)
		}
	}
	switch {
	case r.Flow != AskFlow || r.Run != a.AskID:
		return fmt.Errorf("protocol: the receipt is of %s %s, not of ask %s", r.Flow, r.Run, a.AskID)
	case r.Kind != a.Kind:
		return fmt.Errorf("protocol: the receipt is of a %s, the answer of a %s", r.Kind, a.Kind)
	case r.Decision != want:
		return fmt.Errorf("protocol: the receipt states %s, the answer %s", r.Decision, want)
	}
	if a.Status != AskAnswered {
		return nil
	}
	var digest, stated string
	var err error
	switch {
	case a.Kind == KindApproval && (a.Decision == VerdictApprove || a.Decision == VerdictEdit):
		digest, err = RawArgsDigest(a.Args)
		stated = r.FinalDigest
	case a.Kind == KindApproval:
		return nil
	case a.Kind == KindChoice:
		digest, err = AnswerDigest(nil, a.Selected)
		stated = r.AnswerDigest
	default:
		digest, err = AnswerDigest(a.Answers, nil)
		stated = r.AnswerDigest
	}
	if err != nil {
		return fmt.Errorf("protocol: the answer: %w", err)
	}
	if digest != stated {
		return fmt.Errorf("protocol: the receipt states an answer of digest %.12s, this one's is %.12s", stated, digest)
	}
	return nil
}
