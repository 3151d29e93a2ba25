package mail_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/mail"
)

// envOf is a getenv of vars.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// good is the environment of a valid configuration.
func good(change map[string]string) map[string]string {
	v := map[string]string{mail.EnvHost: "smtp.example.com", mail.EnvFrom: "interlock@example.com", mail.EnvPublicURL: "https://interlock.example.com"}
	for k, x := range change {
		v[k] = x
	}
	return v
}

func TestLoadConfigRefusesWhatIsWrongAndSaysHowToFixIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	withPassword := filepath.Join(dir, "password.yaml")
	_ = os.WriteFile(withPassword, []byte("host: smtp.example.com\npassword: hunter2\n"), 0o600)
	typo := filepath.Join(dir, "typo.yaml")
	_ = os.WriteFile(typo, []byte("hots: smtp.example.com\n"), 0o600)
	for _, tc := range []struct {
		name    string
		file    string
		env     map[string]string
		wantErr string
	}{
		{"no host", "", good(map[string]string{mail.EnvHost: ""}), "no SMTP host: set host in the file or INTERLOCK_SMTP_HOST"},
		{"a port in the host", "", good(map[string]string{mail.EnvHost: "smtp.example.com:587"}), "the port goes in port"},
		{"a port that is not one", "", good(map[string]string{mail.EnvPort: "five"}), "INTERLOCK_SMTP_PORT \"five\" is not a port number"},
		{"an unknown TLS mode", "", good(map[string]string{mail.EnvTLS: "ssl"}), "tls \"ssl\": use starttls"},
		{"no TLS beyond loopback", "", good(map[string]string{mail.EnvTLS: "none"}), "tls none sends mail and its decision links in clear"},
		{"a username without password", "", good(map[string]string{mail.EnvUsername: "u"}), "give the username and the password of SMTP AUTH together"},
		{"no sender", "", good(map[string]string{mail.EnvFrom: ""}), "no sender: set from"},
		{"a sender that is not an address", "", good(map[string]string{mail.EnvFrom: "interlock"}), "from \"interlock\" is not an address"},
		{"no public URL", "", good(map[string]string{mail.EnvPublicURL: ""}), "no public URL: set publicURL"},
		{"an http public URL beyond loopback", "", good(map[string]string{mail.EnvPublicURL: "http://interlock.example.com"}), "decision links are credentials; give an https URL"},
		{"a public URL with a query", "", good(map[string]string{mail.EnvPublicURL: "https://interlock.example.com/?a=b"}), "with no user, query or fragment"},
		{"a password in the file", withPassword, good(nil), "the password is never written in the file"},
		{"an unknown key", typo, good(nil), "field hots not found"},
		{"a missing file", filepath.Join(dir, "none.yaml"), good(nil), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mail.LoadConfig(tc.file, envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("LoadConfig = %v, want an error saying %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error holds the password: %v", err)
			}
		})
	}
}

func TestLoadConfigReadsTheFileThePasswordsFileAndTheEnvironmentOverIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filepath.Join(dir, "smtp-password")
	_ = os.WriteFile(pw, []byte("from-the-file\n"), 0o600)
	f := filepath.Join(dir, "smtp.yaml")
	_ = os.WriteFile(f, []byte("host: smtp.example.com\ntls: tls\nusername: interlock\npasswordFile: "+pw+
		"\nfrom: Interlock <interlock@example.com>\npublicURL: https://interlock.example.com\nlinkTTL: 72h\n"), 0o600)
	cfg, err := mail.LoadConfig(f, envOf(map[string]string{mail.EnvHost: "smtp2.example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "smtp2.example.com" || cfg.TLS != "tls" || cfg.Username != "interlock" || cfg.Password != "from-the-file" || cfg.LinkTTL.Hours() != 72 {
		t.Errorf("config %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	env := filepath.Join(dir, "env.yaml")
	_ = os.WriteFile(env, []byte("host: smtp.example.com\nusername: interlock\npasswordEnv: MY_SMTP_PASSWORD\nfrom: a@example.com\npublicURL: https://i.example.com\n"), 0o600)
	cfg, err = mail.LoadConfig(env, envOf(map[string]string{"MY_SMTP_PASSWORD": "from-the-env"}))
	if err != nil || cfg.Password != "from-the-env" {
		t.Errorf("passwordEnv: %q, %v", cfg.Password, err)
	}
	if _, err := mail.LoadConfig(env, envOf(nil)); err == nil || !strings.Contains(err.Error(), "passwordEnv names MY_SMTP_PASSWORD, which is not set") {
		t.Errorf("passwordEnv unset: %v", err)
	}
	cfg, err = mail.LoadConfig("", envOf(good(map[string]string{mail.EnvHost: "127.0.0.1", mail.EnvTLS: "none", mail.EnvPublicURL: "http://127.0.0.1:8080"})))
	if err != nil || cfg.Port != 25 {
		t.Errorf("loopback without TLS: port %d, %v", cfg.Port, err)
	}
}
