package events_test

import (
	"strings"
	"testing"

	"github.com/interlockhq/interlock/events"
)

func TestRedactTokensLeavesEverythingButTheToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"structured", `{"specversion":"1.0","data":{"resumeToken":"SECRET","answers":{"email":"a"}}}`,
			`{"specversion":"1.0","data":{"resumeToken":"[redacted]","answers":{"email":"a"}}}`},
		{"binary body", `{ "resumeToken" : "SECRET" , "x":[1,{"y":2}]}`, `{ "resumeToken" : "[redacted]" , "x":[1,{"y":2}]}`},
		{"any case", `{"data":{"RESUMETOKEN":"SECRET"}}`, `{"data":{"RESUMETOKEN":"[redacted]"}}`},
		{"not a string", `{"resumeToken":{"a":"SECRET"},"b":1}`, `{"resumeToken":"[redacted]","b":1}`},
		{"after nested values", `{"a":{"b":[{"c":1}]},"resumeToken":"SECRET"}`, `{"a":{"b":[{"c":1}]},"resumeToken":"[redacted]"}`},
		{"two", `[{"resumeToken":"SECRET"},{"resumeToken":"SECRET"}]`, `[{"resumeToken":"[redacted]"},{"resumeToken":"[redacted]"}]`},
		{"a value named so", `{"note":"resumeToken","k":"SECRET-not-a-token"}`, `{"note":"resumeToken","k":"SECRET-not-a-token"}`},
		{"broken JSON", `{"data":{"resumeToken":"SECRET",`, `{"data":{"resumeToken":"[redacted]",`},
		{"broken JSON, cut in the token", `{"data":{"resumeToken":"SECR`, `{"data":{"resumeToken":"[redacted]"`},
		{"no token", `{"data":{"answers":{}}}`, `{"data":{"answers":{}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(events.RedactTokens([]byte(tc.in)))
			if got != tc.want {
				t.Fatalf("RedactTokens(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzRedactTokens(f *testing.F) {
	f.Add([]byte(`{"data":{"resumeToken":"SECRET"}}`))
	f.Add([]byte(`{"resumeToken":"SECRET"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out := events.RedactTokens(body)
		if strings.Contains(strings.ToLower(string(out)), `"resumetoken":"secret`) {
			t.Fatalf("token left in %q", out)
		}
	})
}

func TestTokenHeaderNamesEveryHeaderThatMayCarryAResumeToken(t *testing.T) {
	for name, want := range map[string]bool{
		"ce-resumetoken": true, "Ce-Resumetoken": true, "Resume-Token": true, "X-Resume_Token": true, "resumeToken": true,
		"ce-id": false, "Content-Type": false, "Interlock-Vouch": false, "ce-token": false, "Nats-Msg-Id": false,
	} {
		if got := events.TokenHeader(name); got != want {
			t.Errorf("TokenHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCredentialHeaderNamesHeadersThatMayCarryACredential(t *testing.T) {
	for name, want := range map[string]bool{
		"ce-resumetoken": true, "Resume-Token": true, "Authorization": true, "Proxy-Authorization": true, "Cookie": true,
		"X-Api-Key": true, "X-API_KEY": true, "X-Auth-Token": true, "X-Client-Secret": true, "X-Password": true, "Session-Id": true,
		"ce-id": false, "Content-Type": false, "Nats-Msg-Id": false, "traceparent": false, "Interlock-Approver": false, "Idempotency-Key": false,
	} {
		if got := events.CredentialHeader(name); got != want {
			t.Errorf("CredentialHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
