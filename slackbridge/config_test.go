package slackbridge_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/slackbridge"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("xoxb-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLACK_SIGNING_SECRET", "secret-from-env")
	t.Setenv("OTHER_TOKEN", "xoxb-from-other-env")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-from-default-env")
	base := "channels: {supervisor: C0SUP}\nusers: {U0ANN: {name: ann@example.com, roles: [supervisor]}}\n"
	cases := []struct {
		name, yaml string
		wantErr    string
		check      func(t *testing.T, c slackbridge.Config)
	}{
		{name: "defaults from the environment", yaml: base, check: func(t *testing.T, c slackbridge.Config) {
			if c.Token != "xoxb-from-default-env" || c.SigningSecret != "secret-from-env" || c.Addr != "" ||
				c.Channels["supervisor"] != "C0SUP" || c.Users["U0ANN"].Name != "ann@example.com" {
				t.Errorf("%+v", c)
			}
		}},
		{name: "token from a file, listen and keep", yaml: base + "botToken: {file: " + tokenFile + "}\nlisten: 0.0.0.0:3000\nkeep: 24h\n", check: func(t *testing.T, c slackbridge.Config) {
			if c.Token != "xoxb-from-file" || c.Addr != "0.0.0.0:3000" || c.Keep != 24*time.Hour {
				t.Errorf("%+v", c)
			}
		}},
		{name: "token from a named variable", yaml: base + "botToken: {env: OTHER_TOKEN}\n", check: func(t *testing.T, c slackbridge.Config) {
			if c.Token != "xoxb-from-other-env" {
				t.Errorf("token %q", c.Token)
			}
		}},
		{name: "token in the file itself", yaml: base + "botToken: xoxb-in-yaml\n", wantErr: "never written in the configuration file"},
		{name: "unset variable", yaml: base + "signingSecret: {env: NOT_SET_ANYWHERE}\n", wantErr: "NOT_SET_ANYWHERE is not set"},
		{name: "file and env", yaml: base + "botToken: {file: x, env: Y}\n", wantErr: "not both"},
		{name: "missing file", yaml: base + "botToken: {file: /nonexistent/token}\n", wantErr: "botToken"},
		{name: "typo", yaml: base + "chanels: {}\n", wantErr: "chanels"},
		{name: "bad channel", yaml: "channels: {supervisor: '#supervisors'}\n", wantErr: "not a channel id"},
		{name: "bad user id", yaml: "users: {ann: {name: ann}}\n", wantErr: "not a Slack user id"},
		{name: "user without name", yaml: "users: {U0ANN: {roles: [supervisor]}}\n", wantErr: "give the approver's name"},
		{name: "bad role", yaml: "users: {U0ANN: {name: ann, roles: [a.b]}}\n", wantErr: `"a.b"`},
		{name: "bad listen", yaml: "listen: nowhere\n", wantErr: "Config.Addr"},
		{name: "bad keep", yaml: "keep: soon\n", wantErr: "keep"},
		{name: "short keep", yaml: "keep: 1s\n", wantErr: "at least 1m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := slackbridge.ParseConfig([]byte(tc.yaml), "slack.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestExampleConfigLoads keeps examples/slack/slack.yaml, which
// docs/slack.md shows, a file the bridge takes.
func TestExampleConfigLoads(t *testing.T) {
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-example")
	t.Setenv("SLACK_SIGNING_SECRET", "example-secret")
	c, err := slackbridge.LoadConfig("../examples/slack/slack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Users["U012AB3CD"].Name != "ann@example.com" || c.Channels["supervisor"] == "" {
		t.Errorf("%+v", c)
	}
	doc, err := os.ReadFile("../docs/slack.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "U012AB3CD: {name: ann@example.com, roles: [supervisor]}") {
		t.Error("docs/slack.md no longer shows the example's users")
	}
}
