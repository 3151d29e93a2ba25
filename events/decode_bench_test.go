package events

import "testing"

// benchResume is a resume command as a client sends it.
var benchResume = []byte(`{"specversion":"1.0","id":"0123456789abcdef","source":"/bench/client","type":"io.interlock.run.resume","subject":"r-000042","datacontenttype":"application/json","time":"2026-11-21T10:00:00.123456789Z","data":{"resumeToken":"v1.0123456789abcdef0123456789abcdef0123456789abcdef","answers":{"answer":"ok"}}}`)

// BenchmarkDecodeStructured decodes a resume command in one pass, and as
// decodeStructured did before.
func BenchmarkDecodeStructured(b *testing.B) {
	header := map[string][]string{"Content-Type": {Structured}}
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStructured(header, benchResume); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := legacyDecodeStructured(header, benchResume); err != nil {
				b.Fatal(err)
			}
		}
	})
}
