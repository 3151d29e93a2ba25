package client

import (
	"context"
	"encoding/json"

	"github.com/interlockhq/interlock/protocol"
)

// workersBatch is how many entries of the workers bucket one read asks for.
const workersBatch = 256

// Workers reads the workers bucket (wire.Names.WorkersBucket): the worker
// processes running now, each with the flows it runs and their versions
// (and one that died within the bucket's TTL, 30 seconds). It reads the
// bucket's entries with batched direct gets, one per process, as a client
// may (it creates no consumer).
func (c *Client) Workers(ctx context.Context) ([]protocol.Worker, error) {
	bucket := c.names.WorkersBucket()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET.KV_" + bucket, what: "bucket " + bucket, every: "$KV." + bucket + ".>"}
	var out []protocol.Worker
	for start := uint64(1); ; {
		b, err := g.batch(ctx, start, workersBatch)
		if err != nil {
			return nil, err
		}
		for _, m := range b.msgs {
			start = m.seq + 1
			var w protocol.Worker
			if !m.marker && json.Unmarshal(m.data, &w) == nil && w.Instance != "" {
				out = append(out, w)
			}
		}
		if len(b.msgs) < workersBatch {
			return out, nil
		}
	}
}
