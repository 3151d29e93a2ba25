package typescript_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/interlockhq/interlock/protocol"
)

var update = flag.Bool("update", false, "rewrite clients/testdata/receipts.json from the Go side")

// vectorsFile holds what the Go side computes, for the TypeScript and the
// Python clients to compute alike: args digests and receipts.
const vectorsFile = "../testdata/receipts.json"

// vectorKey is the Ed25519 key of the test vectors' receipts, from a fixed
// seed so that the file is the same at every run (Ed25519 signing is
// deterministic).
func vectorKey(name string) (string, ed25519.PrivateKey, protocol.AuditKey) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seed := sha256.Sum256([]byte(name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	k := protocol.AuditKey{Kid: protocol.AuditKeyID(pub), PublicKey: base64.StdEncoding.EncodeToString(pub), Since: since}
	return k.Kid, priv, k
}

// digestInputs are args as different programs write them: several pairs
// are the same args (key order, 4800, 4.8e3 and 4800.0, a string escaped
// or not), so their digests are equal.
var digestInputs = []struct{ name, args string }{
	{"refund", `{"orderId":"o-1","amount":4800,"currency":"USD"}`},
	{"refund, keys in another order, 4.8e3", `{"currency":"USD","amount":4.8e3,"orderId":"o-1"}`},
	{"refund, spaced, 4800.0", "{ \"amount\" : 4800.0 ,\n  \"orderId\" : \"o-1\", \"currency\": \"USD\" }"},
	{"refund, 4800.000 and an escaped U", `{"amount":4800.000,"currency":"\u0055SD","orderId":"o-1"}`},
	{"refund edited", `{"orderId":"o-1","amount":400,"currency":"USD"}`},
	{"unicode", `{"name":"Zoë","city":"Köln","emoji":"😀","note":"line\nbreak\ttab\u0001\u001f\u007f","quote":"\"q\" \\ /","ls":"\u2028\u2029"}`},
	{"unicode, escaped", `{"ls":"\u2028\u2029","quote":"\"q\" \\ \/","note":"line\u000abreak\u0009tab\u0001\u001F\u007F","emoji":"\ud83d\ude00","city":"K\u00f6ln","name":"Zo\u00eb"}`},
	{"RFC 8785 3.2.3, keys sorted by UTF-16 code units", `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`},
	{"RFC 8785 3.2.2", `{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`},
	{"numbers", `{"n":[0,-0,0.0,1,-1,0.1,-0.5,1e21,1e20,999999999999999900000,1e-6,1e-7,123456789012345678901,5e-324,1.7976931348623157e308,2.2250738585072014e-308,9007199254740993,-1.5e-9,12345.6789,0.30000000000000004,1.5e300,100,1E2,1e+2,0.001,1.0e-3]}`},
	{"nested", `{"a":{"z":[1,{"y":true,"x":null}],"b":false},"list":[],"obj":{}}`},
	{"empty", `{}`},
}

// TestReceiptVectorsAreGos keeps clients/testdata/receipts.json equal to
// what the Go side computes: the canonical JSON and digest
// (protocol.RawArgsDigest) of args written in many ways, and receipts
// signed as the gate signs them, good and bad, with the key that signs
// them. The clients' tests check that they compute the same. After a
// change meant on the Go side, run
// `go test ./clients/typescript -run ReceiptVectors -update`.
func TestReceiptVectorsAreGos(t *testing.T) {
	kid, priv, key := vectorKey("interlock receipt test vectors")
	otherKid, otherPriv, otherKey := vectorKey("interlock receipt test vectors: another key")

	type digestVector struct {
		Name      string `json:"name"`
		Args      string `json:"args"`
		Canonical string `json:"canonical"`
		Digest    string `json:"digest"`
	}
	var digests []digestVector
	byName := map[string]string{}
	for _, in := range digestInputs {
		canonical, err := jcs.Transform([]byte(in.args))
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		d, err := protocol.RawArgsDigest(json.RawMessage(in.args))
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		digests = append(digests, digestVector{Name: in.name, Args: in.args, Canonical: string(canonical), Digest: d})
		byName[in.name] = d
	}
	if byName["refund"] != byName["refund, keys in another order, 4.8e3"] || byName["refund"] != byName["refund, spaced, 4800.0"] ||
		byName["unicode"] != byName["unicode, escaped"] {
		t.Fatal("args written differently have different digests on the Go side")
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	far := time.Date(2126, 1, 2, 3, 4, 5, 0, time.UTC)
	requested := json.RawMessage(`{"orderId":"o-1","amount":4800,"currency":"USD"}`)
	edited := json.RawMessage(`{"orderId":"o-1","amount":400,"currency":"USD"}`)
	approved := protocol.Receipt{Flow: protocol.GateFlow, Run: "call-vec-1", RequestID: "rq_vec1", Kind: "approval", Tool: "issue_refund",
		ArgsDigest: byName["refund"], Decision: protocol.ReceiptApproved, FinalDigest: byName["refund"],
		Approver: "sam", Auth: protocol.AuthToken, Rule: "large-refund", At: at, Expires: far}
	edit := approved
	edit.Run, edit.RequestID, edit.Decision, edit.FinalDigest = "call-vec-2", "rq_vec2", protocol.ReceiptEdited, byName["refund edited"]
	expired := approved
	expired.Expires = at.Add(time.Minute)
	// A call no rule held: the gate allows it itself, and states so.
	allowed := protocol.Receipt{Flow: protocol.GateFlow, Run: "call-vec-3", Tool: "issue_refund", ArgsDigest: byName["refund"],
		Decision: protocol.ReceiptAllowed, Auth: protocol.AuthServer, At: at, Expires: far}
	allowedOther := allowed
	allowedOther.ArgsDigest = byName["refund edited"]

	header := func(alg, kid, typ string) []byte {
		b, err := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": typ})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	payload := func(r protocol.Receipt, v int) []byte {
		r.V = v
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sign := func(priv ed25519.PrivateKey, h, p []byte) string {
		s := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
		return s + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(s)))
	}
	good := func(r protocol.Receipt) string {
		s, err := protocol.SignReceipt(kid, priv, r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	goodApproved, goodEdited, goodAllowed := good(approved), good(edit), good(allowed)
	parts := bytes.Split([]byte(goodApproved), []byte("."))
	editedParts := bytes.Split([]byte(goodEdited), []byte("."))

	type receiptVector struct {
		Name    string            `json:"name"`
		Receipt string            `json:"receipt"`
		Valid   bool              `json:"valid"`
		Expired bool              `json:"expired,omitempty"`
		Payload *protocol.Receipt `json:"payload,omitempty"`
	}
	withV := func(r protocol.Receipt) *protocol.Receipt { r.V = 1; return &r }
	receipts := []receiptVector{
		{Name: "approved", Receipt: goodApproved, Valid: true, Payload: withV(approved)},
		{Name: "edited", Receipt: goodEdited, Valid: true, Payload: withV(edit)},
		{Name: "allowed", Receipt: goodAllowed, Valid: true, Payload: withV(allowed)},
		{Name: "allowed, of other args", Receipt: good(allowedOther), Valid: true, Payload: withV(allowedOther)},
		{Name: "expired", Receipt: good(expired), Expired: true, Payload: withV(expired)},
		{Name: "signed with a key not trusted", Receipt: sign(otherPriv, header("EdDSA", otherKid, protocol.ReceiptType), payload(approved, 1))},
		{Name: "signed with another key under the trusted kid", Receipt: sign(otherPriv, header("EdDSA", kid, protocol.ReceiptType), payload(approved, 1))},
		{Name: "the edited payload under the approved signature", Receipt: string(parts[0]) + "." + string(editedParts[1]) + "." + string(parts[2])},
		{Name: "alg HS256", Receipt: sign(priv, header("HS256", kid, protocol.ReceiptType), payload(approved, 1))},
		{Name: "typ JWT", Receipt: sign(priv, header("EdDSA", kid, "JWT"), payload(approved, 1))},
		{Name: "version 2", Receipt: sign(priv, header("EdDSA", kid, protocol.ReceiptType), payload(approved, 2))},
		{Name: "two parts", Receipt: string(parts[0]) + "." + string(parts[1])},
		{Name: "padded signature", Receipt: goodApproved + "=="},
		{Name: "standard base64 signature", Receipt: string(parts[0]) + "." + string(parts[1]) + "." + base64.StdEncoding.EncodeToString(mustRawURL(t, string(parts[2])))},
		{Name: "empty signature", Receipt: string(parts[0]) + "." + string(parts[1]) + "."},
	}
	keys := map[string]ed25519.PublicKey{kid: priv.Public().(ed25519.PublicKey)}
	now := at.Add(time.Hour)
	for _, v := range receipts {
		_, err := protocol.VerifyReceipt(keys, v.Receipt, now)
		switch {
		case v.Valid && err != nil:
			t.Fatalf("%s: the Go side refuses a receipt the vectors say is valid: %v", v.Name, err)
		case v.Expired && !errors.Is(err, protocol.ErrReceiptExpired):
			t.Fatalf("%s: the Go side does not find it expired: %v", v.Name, err)
		case !v.Valid && !v.Expired && !errors.Is(err, protocol.ErrReceiptInvalid):
			t.Fatalf("%s: the Go side takes a receipt the vectors say is invalid (%v)", v.Name, err)
		}
	}

	decided := func(callID, decision string, args json.RawMessage, final, receipt string) protocol.Decided {
		return protocol.Decided{CallID: callID, Decision: decision, Tool: "issue_refund", ArgsDigest: byName["refund"],
			Args: args, FinalDigest: final, Approver: "sam", Rule: "large-refund", Receipt: receipt}
	}
	decisions := []protocol.Decided{
		decided("call-vec-1", protocol.DecidedApproved, requested, byName["refund"], goodApproved),
		decided("call-vec-2", protocol.DecidedEdited, edited, byName["refund edited"], goodEdited),
		{CallID: "call-vec-3", Decision: protocol.DecidedAllowed, Tool: "issue_refund", ArgsDigest: byName["refund"], Receipt: goodAllowed},
	}
	for _, d := range decisions {
		r, err := protocol.VerifyReceipt(keys, d.Receipt, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckDecided(d); err != nil {
			t.Fatalf("%s: %v", d.CallID, err)
		}
	}

	out := map[string]any{
		"comment": "Computed by the Go side (protocol.RawArgsDigest, protocol.SignReceipt): go test ./clients/typescript -run ReceiptVectors -update. " +
			"Receipts verify at `now` with `keys`; `untrusted` signed some of the bad ones. Each decision is the gate's decided data of a call of issue_refund with the args of digest `refund`: " +
			"approved, edited, and allowed (no rule held it; `allowed, of other args` is the gate's receipt of the same call id requested with the args of digest `refund edited`).",
		"now":       now,
		"keys":      []protocol.AuditKey{key},
		"untrusted": []protocol.AuditKey{otherKey},
		"digests":   digests,
		"receipts":  receipts,
		"call":      map[string]any{"tool": "issue_refund", "args": requested},
		"decisions": decisions,
	}
	got, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(vectorsFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("%v: run go test ./clients/typescript -run ReceiptVectors -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the Go side computes now: if the change is meant, run go test ./clients/typescript -run ReceiptVectors -update", vectorsFile)
	}
}

func mustRawURL(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
