package enginetest_test

import (
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/engine/publishertest"
)

func TestPublisherKeepsThePublisherPromises(t *testing.T) {
	publishertest.Run(t, func(*testing.T) (engine.Publisher, publishertest.Reader) {
		p := enginetest.NewPublisher()
		return p, publishertest.Reader{Stored: func(_ *testing.T, flow, run string) []publishertest.Stored {
			var out []publishertest.Stored
			for _, m := range p.Messages(run) {
				if m.Flow == flow {
					out = append(out, publishertest.Stored{Stream: m.Stream, ID: m.ID})
				}
			}
			return out
		}}
	})
}
