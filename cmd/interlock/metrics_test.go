package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServeServesMetricsAndHealth(t *testing.T) {
	line := serveLine(t)
	_, rest, ok := strings.Cut(line, "metrics on ")
	url, _, _ := strings.Cut(rest, ". ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("serve's first line names no metrics endpoint: %q", line)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]string{"/metrics": "interlock_ready 1", "/healthz": "ok", "/readyz": `{"ready":true}`} {
		resp, err := c.Get(strings.TrimSuffix(url, "/metrics") + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %v, want 200 with %q:\n%.300s", path, resp.StatusCode, err, want, body)
		}
	}
}

func TestServeWithoutMetrics(t *testing.T) {
	if line := serveLine(t, "--metrics", ""); strings.Contains(line, "metrics") {
		t.Fatalf("--metrics \"\" still serves metrics: %q", line)
	}
}
