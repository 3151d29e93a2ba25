package wire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/wire"
)

func TestConnectErrorsNeverShowAPasswordOrTokenInTheURL(t *testing.T) {
	for _, url := range []string{
		"nats://alice:s3cret-pw@127.0.0.1:1",
		"nats://s3cret-pw@127.0.0.1:1",
		"nats://127.0.0.1:1,nats://bob:s3cret-pw@127.0.0.1:2",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, _, err := wire.Connect(ctx, wire.ConnConfig{URL: url})
		cancel()
		if err == nil {
			t.Fatalf("Connect(%s) connected to nothing", url)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Connect(%s) error shows the secret: %v", url, err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("Connect(%s) error does not say where: %v", url, err)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":               "nats://127.0.0.1:4222",
		"nats://alice:pw@h:4222":              "nats://alice:xxxxx@h:4222",
		"nats://tok@h:4222":                   "nats://xxxxx@h:4222",
		"nats://a:pw@h1:4222, nats://h2:4222": "nats://a:xxxxx@h1:4222,nats://h2:4222",
		"tls://a:p%20w@h:4222,nats://b:q@h2":  "tls://a:xxxxx@h:4222,nats://b:xxxxx@h2",
		"not a url :: user:pw@host":           "xxxxx@host",
		"nats://[::1]:4222":                   "nats://[::1]:4222",
	} {
		if got := wire.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
