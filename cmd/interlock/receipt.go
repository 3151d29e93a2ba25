package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

const receiptAbout = `receipt verify checks a decision's receipt: the compact JWS that decided,
answered and resumed events carry (field receipt), signed with the deployment's
audit key. It takes the receipt itself, or a file (- for standard input) holding
it, an event's data, or a whole CloudEvent whose data holds it. With --key it
needs nothing but that public key (as serve and interlock audit key print it):
it verifies offline. Without --key it reads the keys the deployment's workers
published. It prints what the receipt states (who decided what, about which
args, how they were authenticated, when, and until when it holds), and exits 1
when it does not verify or has expired. docs/protocol.md (Receipts) shows the
same check in a few lines of any language.
`

// receiptCmd runs `interlock receipt verify`.
func receiptCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintf(stdout, "Usage: interlock receipt verify [--key KEY ...] [RECEIPT | FILE | -]\n\n%s", receiptAbout)
			return nil
		}
		return usageOf("receipt", "use: interlock receipt verify [--key KEY ...] [RECEIPT | FILE | -]")
	}
	fs := newFlagSet("receipt", "receipt verify [--key KEY ...] [RECEIPT | FILE | -]", stderr)
	cf := &clientFlags{}
	cf.register(fs)
	var pinned auditKeys
	fs.Var(&pinned, "key", "verify with this audit public `key` alone (base64, as `interlock audit key` and serve print it), not with the keys the deployment published; repeat it for several")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return helpOK(err)
	}
	if len(pos) > 1 {
		return usageOf("receipt", "receipt verify takes one receipt, file or -, but was given %s", quoteAll(pos))
	}
	input := "-"
	if len(pos) == 1 {
		input = pos[0]
	}
	jws, err := readReceipt(input)
	if err != nil {
		return err
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range pinned {
		pub, err := k.Key()
		if err != nil {
			return usagef("--key: %s", strings.TrimPrefix(err.Error(), "protocol: "))
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		c, closeFn, err := cf.dial(ctx)
		if err != nil {
			return err
		}
		defer closeFn()
		published, err := c.AuditKeys(ctx)
		if err != nil {
			return err
		}
		for _, k := range published {
			if pub, err := k.Key(); err == nil {
				keys[k.Kid] = pub
			}
		}
	}
	r, verr := protocol.VerifyReceipt(keys, jws, time.Now())
	kid := protocol.ReceiptKid(jws)
	if cf.json {
		out := struct {
			Valid   bool              `json:"valid"`
			Error   string            `json:"error,omitempty"`
			Kid     string            `json:"kid,omitempty"`
			Receipt *protocol.Receipt `json:"receipt,omitempty"`
		}{Valid: verr == nil, Kid: kid}
		if verr != nil {
			out.Error = strings.TrimPrefix(verr.Error(), "protocol: ")
		}
		if verr == nil || errors.Is(verr, protocol.ErrReceiptExpired) {
			out.Receipt = &r
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
		if verr != nil {
			return reported(exitFailed)
		}
		return nil
	}
	if verr != nil && !errors.Is(verr, protocol.ErrReceiptExpired) {
		fmt.Fprintf(stdout, "receipt NOT VALID: %s\n", strings.TrimPrefix(verr.Error(), "protocol: "))
		return reported(exitFailed)
	}
	state := "VALID"
	if verr != nil {
		state = "EXPIRED (" + strings.TrimPrefix(verr.Error(), "protocol: ") + ")"
	}
	fmt.Fprintf(stdout, "receipt %s: %s\n", state, receiptSentence(r))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"run", r.Flow + " " + r.Run}, {"request", r.RequestID}, {"kind", r.Kind}, {"tool", r.Tool}, {"server", r.Server},
		{"args digest", r.ArgsDigest}, {"decision", r.Decision}, {"final digest", r.FinalDigest}, {"answer digest", r.AnswerDigest},
		{"approver", r.Approver}, {"authenticated by", string(r.Auth)}, {"voters", strings.Join(r.Voters, ", ")}, {"rule", r.Rule},
		{"at", r.At.UTC().Format(time.RFC3339)}, {"expires", r.Expires.UTC().Format(time.RFC3339)}, {"signed with key", kid},
	} {
		if row[1] != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if verr != nil {
		return reported(exitFailed)
	}
	return nil
}

// receiptSentence says what a receipt states in one line.
func receiptSentence(r protocol.Receipt) string {
	what := r.Kind
	if r.Tool != "" {
		what += " of " + r.Tool
	}
	by := r.Approver
	if r.Auth != "" {
		by += " (" + string(r.Auth) + ")"
	}
	s := fmt.Sprintf("%s %s by %s at %s", what, r.Decision, by, r.At.UTC().Format(time.RFC3339))
	if r.Rule != "" {
		s += ", rule " + r.Rule
	}
	return s
}

// readReceipt reads a receipt given as itself, or from a file (- for
// standard input) that holds it, an event's data or a CloudEvent.
func readReceipt(input string) (string, error) {
	text := input
	if input == "-" || !looksLikeJWS(input) {
		var b []byte
		var err error
		if input == "-" {
			b, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
		} else {
			b, err = os.ReadFile(input)
		}
		if err != nil {
			return "", usagef("receipt verify: %v; give the receipt itself, a file holding it or an event with it, or - for standard input", err)
		}
		text = string(bytes.TrimSpace(b))
	}
	if looksLikeJWS(text) {
		return text, nil
	}
	var doc any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return "", usagef("receipt verify: %s is neither a receipt (header.payload.signature) nor JSON holding one", describeInput(input))
	}
	if jws, ok := findReceipt(doc, 0); ok {
		return jws, nil
	}
	return "", usagef("receipt verify: %s holds no receipt (a field receipt, as in an event's data, or in a CloudEvent's data)", describeInput(input))
}

// findReceipt finds the first field receipt holding a receipt in a JSON
// document, no deeper than a few levels.
func findReceipt(v any, depth int) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || depth > 4 {
		return "", false
	}
	if s, ok := m["receipt"].(string); ok && looksLikeJWS(s) {
		return s, true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if s, ok := findReceipt(m[k], depth+1); ok {
			return s, true
		}
	}
	return "", false
}

// looksLikeJWS reports whether s has the shape of a compact JWS.
func looksLikeJWS(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.ContainsAny(s, " \n\t{}\"")
}

// describeInput names the input in errors.
func describeInput(input string) string {
	if input == "-" {
		return "standard input"
	}
	return input
}
