package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a vouched command: one that a trusted part of a deployment
// (the HTTP API, the inbox, the Slack bridge, which authenticated the
// caller) sends on the caller's behalf. The worker accepts the approver and
// roles they name only when HeaderVouch verifies under the deployment's
// secret.
const (
	// HeaderApprover names the authenticated caller.
	HeaderApprover = "Interlock-Approver"
	// HeaderRoles lists the caller's approver roles, comma-separated.
	HeaderRoles = "Interlock-Roles"
	// HeaderAuth says how the surface authenticated the caller: an
	// [AuthMethod] it vouches for (token, session, link, slack...).
	HeaderAuth = "Interlock-Auth"
	// HeaderVouch binds the command (its subject, event id, run and
	// body), the approver, the roles, the method and an expiry, with an
	// HMAC under the deployment's secret: "v3.<expiry, Unix
	// seconds>.<HMAC, base64url>". A vouch of the previous version (v2,
	// without a method) still verifies, as made by a service of its time.
	HeaderVouch = "Interlock-Vouch"
)

// VouchTTL is how long a vouch holds after it is made: a vouched command
// that waits in the inbound stream longer (no worker ran meanwhile) is
// refused, and is to be sent again.
const VouchTTL = time.Hour

// Vouched is what a vouch binds: the command as published and the
// caller it is published for.
type Vouched struct {
	// Subject is the NATS subject the command is published to
	// (<prefix>.in.<flow>.<verb>): its flow and verb.
	Subject string
	// EventID and Run are the CloudEvent's id and subject.
	EventID, Run string
	// Body is the message's body: in structured mode the whole CloudEvent,
	// its data (the request id, the decision, the edits) included.
	Body []byte
	// Approver and Roles are the authenticated caller; Method how the
	// service authenticated them.
	Approver string
	Roles    []string
	Method   AuthMethod
}

// mac is the HMAC-SHA256 of v and expires under secret, as a vouch of
// version (v2 or v3) makes it.
func (v Vouched) mac(secret []byte, version string, expires int64) []byte {
	body := sha256.Sum256(v.Body)
	m := hmac.New(sha256.New, secret)
	parts := []string{"interlock/vouch/" + version, v.Subject, v.EventID, v.Run, v.Approver,
		strings.Join(v.Roles, ","), strconv.FormatInt(expires, 10), string(body[:])}
	if version != "v2" {
		parts = append(parts, string(v.Method))
	}
	for _, part := range parts {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// Vouch returns the HeaderVouch value for v, good until expires.
func Vouch(secret []byte, v Vouched, expires time.Time) string {
	e := expires.Unix()
	return "v3." + strconv.FormatInt(e, 10) + "." + base64.RawURLEncoding.EncodeToString(v.mac(secret, "v3", e))
}

// Errors of [VerifyVouch].
var (
	// ErrVouchInvalid: the vouch is not one the deployment's secret made
	// for this command and caller.
	ErrVouchInvalid = errors.New("protocol: the vouch does not verify")
	// ErrVouchExpired: the vouch was good, but its time has passed.
	ErrVouchExpired = errors.New("protocol: the vouch has expired")
)

// VerifyVouch checks a HeaderVouch value against the command and caller
// it comes with, at now: it fails with ErrVouchInvalid unless secret made
// it for exactly v (the same subject, event id, run, body, approver,
// roles and method; the HMAC compared in constant time), and with
// ErrVouchExpired once its expiry has passed. A v2 vouch binds no method:
// v.Method must then be empty.
func VerifyVouch(secret []byte, v Vouched, vouch string, now time.Time) error {
	version, rest, ok := strings.Cut(vouch, ".")
	if !ok || (version != "v3" && version != "v2") || (version == "v2" && v.Method != "") {
		return fmt.Errorf("%w: it is not v3.<expiry>.<hmac>", ErrVouchInvalid)
	}
	exp, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return fmt.Errorf("%w: it is not v3.<expiry>.<hmac>", ErrVouchInvalid)
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: its expiry %q is not a number", ErrVouchInvalid, exp)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, v.mac(secret, version, e)) {
		return ErrVouchInvalid
	}
	if at := time.Unix(e, 0); !now.Before(at) {
		return fmt.Errorf("%w: it held until %s", ErrVouchExpired, at.UTC().Format(time.RFC3339))
	}
	return nil
}

// ParseRoles splits a HeaderRoles value.
func ParseRoles(h string) []string {
	var roles []string
	for _, r := range strings.Split(h, ",") {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return roles
}
