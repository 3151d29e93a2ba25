package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/webhook"
)

func TestParseReadsEveryField(t *testing.T) {
	set, err := webhook.Parse([]byte(`subscriptions:
  - name: crm
    url: https://crm.example.com/hooks/interlock
    secretEnv: CRM_SECRET
    events: [interrupted, resumed, expired]
    flows: [refund]
    roles: [finance]
    retryFor: 2h
    timeout: 5s
    callbacks: true
    callbacksAs: crm-bot
  - name: local
    url: http://127.0.0.1:8080/hook
    secretFile: /run/secrets/hook
    events: interrupted
  - name: inline
    url: https://hooks.example.com/in
    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    events: [answered]
`), "webhooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	subs := set.Subscriptions()
	if len(subs) != 3 {
		t.Fatalf("%d subscriptions", len(subs))
	}
	crm, local, inline := subs[0], subs[1], subs[2]
	if inline.Secret != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Fatalf("inline = %+v, want its secret", inline)
	}
	if crm.Name != "crm" || crm.SecretEnv != "CRM_SECRET" || len(crm.Events) != 3 || crm.Flows[0] != "refund" || crm.Roles[0] != "finance" ||
		crm.RetryFor != 2*time.Hour || crm.Timeout != 5*time.Second || !crm.Callbacks || crm.CallbacksAs != "crm-bot" {
		t.Fatalf("crm = %+v", crm)
	}
	if local.RetryFor != webhook.DefaultRetryFor || local.Timeout != webhook.DefaultTimeout || local.SecretFile != "/run/secrets/hook" || local.Events[0] != "interrupted" {
		t.Fatalf("local = %+v; want the defaults", local)
	}
}

func TestBadSubscriptionsAreRefusedSayingWhatToFix(t *testing.T) {
	const ok = "  - name: crm\n    url: https://crm.example.com/h\n    secretEnv: S\n    events: [interrupted]\n"
	for _, tc := range []struct {
		name, yaml, wantErr string
	}{
		{"empty", "", "the file is empty"},
		{"not a list", "subscriptions: {}\n", "must be a list"},
		{"missing list", "hooks: []\n", `unknown field "hooks"`},
		{"unknown field", ok + "    secrets: x\n", `unknown field "secrets"`},
		{"wrong case", ok + "    retryfor: 1h\n", `did you mean "retryFor"`},
		{"bad name", strings.Replace(ok, "name: crm", "name: c.r.m", 1), "use 1 to 64 letters"},
		{"duplicate name", ok + ok, "is also the name of the subscription on line 2"},
		{"plain http", strings.Replace(ok, "https://crm.example.com/h", "http://crm.example.com/h", 1), "insecureHttp: true"},
		{"ftp", strings.Replace(ok, "https://crm.example.com/h", "ftp://crm.example.com/h", 1), "use an https:// URL"},
		{"password in url", strings.Replace(ok, "https://crm", "https://u:hunter2@crm", 1), "holds a user name or password"},
		{"relative url", strings.Replace(ok, "https://crm.example.com/h", "/hooks", 1), "not an absolute URL"},
		{"no secret", strings.Replace(ok, "    secretEnv: S\n", "", 1), "give exactly one of secret"},
		{"two secrets", ok + "    secretFile: /x\n", "found 2"},
		{"callbacks without a person", ok + "    callbacks: true\n", "callbacks: true needs callbacksAs"},
		{"a person without callbacks", ok + "    callbacksAs: crm-bot\n", "is set but callbacks is not"},
		{"callbacks as no name", ok + "    callbacks: true\n    callbacksAs: a b\n", "name a person of the directory"},
		{"inline secret that is no secret", strings.Replace(ok, "secretEnv: S", "secret: whsec_aHVudGVyMmh1bnRlcjI=", 1), "the secret's key is"},
		{"unknown kind", strings.Replace(ok, "[interrupted]", "[interrupted, approved]", 1), `"approved" is not an event kind; use: started, interrupted`},
		{"no events", strings.Replace(ok, "    events: [interrupted]\n", "", 1), "events: is missing"},
		{"bad flow", ok + "    flows: [a.b]\n", "not a flow name"},
		{"bad duration", ok + "    retryFor: forever\n", "use a duration from 1s"},
		{"timeout too long", ok + "    timeout: 1h\n", "to 5m0s"},
		{"not a bool", ok + "    callbacks: yes please\n", "must be true or false"},
		{"two documents", "subscriptions: []\n---\nsubscriptions: []\n", "a second YAML document"},
		{"not yaml", "subscriptions: [\n", "not valid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhook.Parse([]byte("subscriptions:\n"+tc.yaml), "hooks.yaml")
			if tc.name == "empty" || tc.name == "not a list" || tc.name == "missing list" || tc.name == "two documents" || tc.name == "not yaml" {
				_, err = webhook.Parse([]byte(tc.yaml), "hooks.yaml")
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse error = %v; want one containing %q", err, tc.wantErr)
			}
			var we *webhook.Error
			if !errors.As(err, &we) || !strings.HasPrefix(err.Error(), "webhooks hooks.yaml: ") {
				t.Fatalf("error %q is not a *webhook.Error naming the file", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error repeats a secret: %v", err)
			}
		})
	}
}

func TestShortSecretsAreRefused(t *testing.T) {
	set, err := webhook.Parse([]byte("subscriptions:\n"+subscription("crm", "https://crm.example.com/h")), "hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = set.Resolve(func(string) (string, bool) { return "whsec_c2hvcnQ=", true })
	if err == nil || !strings.Contains(err.Error(), "the secret's key is 5 bytes; use 24 to 64") {
		t.Fatalf("Resolve of a 5-byte secret = %v", err)
	}
	err = set.Resolve(func(string) (string, bool) { return "hunter2hunter2hunter2hunter2hunter2", true })
	if err == nil || !strings.Contains(err.Error(), "starts with whsec_") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Resolve of a secret without whsec_ = %v", err)
	}
}

func TestEmptySubscriptionsAreValid(t *testing.T) {
	set, err := webhook.Parse([]byte("subscriptions: []\n"), "none.yaml")
	if err != nil || len(set.Subscriptions()) != 0 {
		t.Fatalf("Parse(subscriptions: []) = %v, %v", set, err)
	}
}

func TestResolveSaysWhichSecretIsMissing(t *testing.T) {
	set, err := webhook.Parse([]byte("subscriptions:\n"+subscription("crm", "https://crm.example.com/h")+
		"  - name: other\n    url: https://o.example.com/h\n    secretEnv: BAD_SECRET\n    events: [interrupted]\n"), "hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = set.Resolve(func(name string) (string, bool) {
		if name == "BAD_SECRET" {
			return "whsec_not base64!", true
		}
		return env(name)
	})
	if err == nil || !strings.Contains(err.Error(), "subscription other: secretEnv BAD_SECRET: the part of the secret after whsec_ is not standard base64") ||
		strings.Contains(err.Error(), "crm") || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("Resolve = %v; want only other's secret named, its value not repeated", err)
	}
}

func TestRedactDropsWhatAURLHidesCredentialsIn(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h.example/x?token=s#f": "https://h.example/x?redacted",
		"https://h.example/x":               "https://h.example/x",
	} {
		if got := webhook.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParse parses arbitrary bytes: it never panics, every error is a
// *webhook.Error naming the source, and a set that parses parses again
// from its Source with the same subscriptions, each complete. Seeds live
// in testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	f.Add([]byte("subscriptions: []\n"))
	f.Add([]byte("subscriptions:\n" + subscription("crm", "https://crm.example.com/h")))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := webhook.Parse(data, "fuzz.yaml")
		if err != nil {
			var we *webhook.Error
			if !errors.As(err, &we) || !strings.HasPrefix(err.Error(), "webhooks fuzz.yaml: ") {
				t.Fatalf("error %q is not a *webhook.Error naming the source", err)
			}
			return
		}
		again, err := webhook.Parse(set.Source(), "again")
		if err != nil || len(again.Subscriptions()) != len(set.Subscriptions()) {
			t.Fatalf("the source of a parsed set does not parse again the same: %v", err)
		}
		for _, s := range set.Subscriptions() {
			secrets := 0
			for _, v := range []string{s.Secret, s.SecretEnv, s.SecretFile} {
				if v != "" {
					secrets++
				}
			}
			if s.Name == "" || s.URL == "" || len(s.Events) == 0 || s.Timeout <= 0 || s.RetryFor <= 0 || secrets != 1 {
				t.Fatalf("subscription %+v is incomplete", s)
			}
			if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
				t.Fatalf("subscription %s has URL %q", s.Name, webhook.Redact(s.URL))
			}
		}
	})
}
