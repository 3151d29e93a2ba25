package protocol_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// TestAVouchHoldsForItsCallerAndTheWayTheyWereAuthenticated checks that a
// vouch binds the method beside the caller: the same command vouched for
// the same caller authenticated another way does not verify; a vouch of
// the previous version, which binds no method, still does, for no method.
func TestAVouchHoldsForItsCallerAndTheWayTheyWereAuthenticated(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("k", 32))
	now := time.Now()
	v := protocol.Vouched{Subject: "interlock.in.refund.resume", EventID: "e-1", Run: "r-1", Body: []byte(`{}`),
		Approver: "ann@example.com", Roles: []string{"supervisor"}, Method: protocol.AuthLink}
	vouch := protocol.Vouch(secret, v, now.Add(time.Hour))
	if !strings.HasPrefix(vouch, "v3.") {
		t.Fatalf("vouch %q, want v3", vouch)
	}
	if err := protocol.VerifyVouch(secret, v, vouch, now); err != nil {
		t.Fatalf("as made: %v", err)
	}
	for name, change := range map[string]func(*protocol.Vouched){
		"another method":   func(v *protocol.Vouched) { v.Method = protocol.AuthToken },
		"no method":        func(v *protocol.Vouched) { v.Method = "" },
		"another caller":   func(v *protocol.Vouched) { v.Approver = "bob@example.com" },
		"another role":     func(v *protocol.Vouched) { v.Roles = []string{"finance_lead"} },
		"every role":       func(v *protocol.Vouched) { v.Roles = []string{protocol.AllRoles} },
		"another body":     func(v *protocol.Vouched) { v.Body = []byte(`{"decision":"approve"}`) },
		"another run":      func(v *protocol.Vouched) { v.Run = "r-2" },
		"another event id": func(v *protocol.Vouched) { v.EventID = "e-2" },
	} {
		w := v
		change(&w)
		if err := protocol.VerifyVouch(secret, w, vouch, now); !errors.Is(err, protocol.ErrVouchInvalid) {
			t.Errorf("%s: %v, want ErrVouchInvalid", name, err)
		}
	}
	// A v2 vouch made as a service of the previous version made one.
	old := v
	old.Method = ""
	v3 := protocol.Vouch(secret, old, now.Add(time.Hour))
	v2 := "v2." + strings.TrimPrefix(v3, "v3.")
	if err := protocol.VerifyVouch(secret, old, v2, now); !errors.Is(err, protocol.ErrVouchInvalid) {
		t.Fatalf("a v3 HMAC under the v2 label: %v, want ErrVouchInvalid", err)
	}
	if err := protocol.VerifyVouch(secret, v, "v2."+strings.TrimPrefix(vouch, "v3."), now); !errors.Is(err, protocol.ErrVouchInvalid) {
		t.Fatalf("a v2 vouch for a method: %v, want ErrVouchInvalid", err)
	}
	// A v2 vouch as docs/protocol.md spells it (without the method).
	exp := now.Add(time.Hour).Unix()
	body := sha256.Sum256(old.Body)
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"interlock/vouch/v2", old.Subject, old.EventID, old.Run, old.Approver, "supervisor", strconv.FormatInt(exp, 10), string(body[:])} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	v2 = "v2." + strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	if err := protocol.VerifyVouch(secret, old, v2, now); err != nil {
		t.Fatalf("a v2 vouch of the previous version: %v", err)
	}
}
