package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// benchInterrupted is the data of a question's interrupted event.
var benchInterrupted = &protocol.Interrupted{Flow: "bench", Run: "r-000042", Node: "ask", RequestID: "rq_0123456789abcdef",
	ResumeToken: "v1.0123456789abcdef0123456789abcdef0123456789abcdef", Checkpoint: 7, Kind: protocol.KindQuestion,
	Questions: []protocol.Question{{Field: "answer", Question: "Go ahead?"}}, Origin: json.RawMessage(`{"slack":{"channel":"C1"}}`)}

// BenchmarkEncodeOutbound encodes an interrupted event as the publisher
// does, directly, and through sdk-go, as it did.
func BenchmarkEncodeOutbound(b *testing.B) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b.Run("direct", func(b *testing.B) {
		enc := events.NewEncoder("interlock/bench")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := enc.AppendOutbound(make([]byte, 0, 512), "abc-7", protocol.TypeInterrupted, "bench", "r-000042", tp, "", at, benchInterrupted); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev, err := events.Outbound("abc-7", "interlock/bench", protocol.TypeInterrupted, "bench", "r-000042", tp, at, benchInterrupted)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := events.EncodeSDK(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev, err := events.Outbound("abc-7", "interlock/bench", protocol.TypeInterrupted, "bench", "r-000042", tp, at, benchInterrupted)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := events.Encode(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
