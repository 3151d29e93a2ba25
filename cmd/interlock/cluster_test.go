package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/bus"
)

// TestServeRefusesClusterSettingsItCannotHonour: each refusal names the
// fix, and none leaves a server behind.
func TestServeRefusesClusterSettingsItCannotHonour(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		wantIs  error
		wantErr string
	}{
		{name: "replicas 2", args: []string{"--replicas", "2"}, wantErr: "use 1, 3"},
		{name: "cluster flags with --nats-url", args: []string{"--nats-url", "nats://127.0.0.1:1", "--cluster-name", "c"}, wantErr: "configure the embedded server"},
		{name: "bad cluster listen", args: []string{"--cluster-name", "c", "--cluster-listen", "6222"}, wantErr: "--cluster-listen"},
		{name: "cluster without a name", args: []string{"--routes", "nats://127.0.0.1:6222"}, wantErr: "--cluster-name"},
		{name: "routes beyond loopback unauthenticated", args: []string{"--cluster-name", "c", "--cluster-listen", "0.0.0.0:-1"}, wantIs: bus.ErrNoClusterAuth, wantErr: "--insecure-cluster-no-auth"},
		{name: "3 replicas on one server", args: []string{"--replicas", "3"}, wantIs: bus.ErrReplicas, wantErr: "use --replicas 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync", "--metrics", "", "--log-level", "error"}, tc.args...)
			err := Run(t.Context(), args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("serve %v = %v, want an error saying %q", tc.args, err, tc.wantErr)
			}
		})
	}
}
