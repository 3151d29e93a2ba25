package bus

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// PublishFlowInfo writes what a worker knows of a flow it serves to the
// live-configuration bucket (<prefix>_config, key [protocol.FlowKey]),
// where surfaces read it to type a person's field=value. A value equal to
// the one there is not written again.
func PublishFlowInfo(ctx context.Context, js jetstream.JetStream, n wire.Names, info protocol.FlowInfo) error {
	kv, err := js.KeyValue(ctx, n.ConfigBucket())
	if err != nil {
		return fmt.Errorf("bus: binding bucket %s to describe flow %s: %w", n.ConfigBucket(), info.Flow, err)
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	key := protocol.FlowKey(info.Flow)
	if e, err := kv.Get(ctx, key); err == nil && string(e.Value()) == string(b) {
		return nil
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("bus: writing %s in %s: %w", key, n.ConfigBucket(), err)
	}
	return nil
}
