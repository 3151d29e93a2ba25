package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Headers of a vouched command: one that a trusted part of a deployment
// (the HTTP API, which authenticated the caller) sends on the caller's
// behalf. The worker accepts the approver and roles they name only when
// HeaderVouch verifies under the deployment's secret.
const (
	// HeaderApprover names the authenticated caller.
	HeaderApprover = "Interlock-Approver"
	// HeaderRoles lists the caller's approver roles, comma-separated.
	HeaderRoles = "Interlock-Roles"
	// HeaderVouch is the HMAC that binds the event id, approver and roles.
	HeaderVouch = "Interlock-Vouch"
)

// Vouch returns the HMAC-SHA256, under secret, of a command's event id,
// the approver and the roles it is sent for.
func Vouch(secret []byte, eventID, approver string, roles []string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("interlock/vouch/v1\x00" + eventID + "\x00" + approver + "\x00" + strings.Join(roles, ",")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// VerifyVouch reports whether vouch is the HMAC [Vouch] gives, compared in
// constant time.
func VerifyVouch(secret []byte, eventID, approver string, roles []string, vouch string) bool {
	return hmac.Equal([]byte(vouch), []byte(Vouch(secret, eventID, approver, roles)))
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
