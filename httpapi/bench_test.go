package httpapi_test

import (
	"net/http"
	"testing"
)

// BenchmarkListInterrupts reads a page of GET /v1/interrupts from a pending
// index of 10 000 real runs: a page costs the same however many wait.
//
//	go test ./httpapi -run '^$' -bench ListInterrupts
func BenchmarkListInterrupts(b *testing.B) {
	a := startAPI(b, nil)
	startRuns(b, a, "booking", "b", 10_000, map[string]any{})
	b.ResetTimer()
	for b.Loop() {
		a.must(http.StatusOK, "GET", "/v1/interrupts?limit=100&kind=question", nil)
	}
}
