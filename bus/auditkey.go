package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// maxKeyWrites bounds the compare-and-set attempts of PublishAuditKey
// while other workers publish at the same time.
const maxKeyWrites = 16

// PublishAuditKey adds key to the audit keys in the live-configuration
// bucket (<prefix>_config, key [protocol.AuditKeysKey]), where clients read
// them and may not write, unless the list already holds its kid; it
// returns the list as it then stands. Keys are only ever added, with
// compare-and-set, so that workers starting together each add theirs and
// a key published before a change of the secret stays to verify the
// records it signed. A value that is not a list of audit keys is an
// error: it is left for an operator to look at, never overwritten.
func PublishAuditKey(ctx context.Context, js jetstream.JetStream, n wire.Names, key protocol.AuditKey) ([]protocol.AuditKey, error) {
	if _, err := key.Key(); err != nil {
		return nil, fmt.Errorf("bus: publishing audit key: %w", err)
	}
	kv, err := js.KeyValue(ctx, n.ConfigBucket())
	if err != nil {
		return nil, fmt.Errorf("bus: binding bucket %s to publish the audit key: %w", n.ConfigBucket(), err)
	}
	for range maxKeyWrites {
		e, err := kv.Get(ctx, protocol.AuditKeysKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			keys := []protocol.AuditKey{key}
			b, _ := json.Marshal(keys)
			_, err := kv.Create(ctx, protocol.AuditKeysKey, b)
			if err == nil {
				return keys, nil
			}
			if !casConflict(err) {
				return nil, fmt.Errorf("bus: writing %s in %s: %w", protocol.AuditKeysKey, n.ConfigBucket(), err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bus: reading %s in %s: %w", protocol.AuditKeysKey, n.ConfigBucket(), err)
		}
		keys, err := protocol.DecodeAuditKeys(e.Value())
		if err != nil {
			return nil, fmt.Errorf("bus: %s in %s (revision %d) is not a list of audit keys, so the workers cannot add theirs: %w; "+
				"look at its history (nats kv history %s %s) and put back the last good list", protocol.AuditKeysKey, n.ConfigBucket(), e.Revision(), err,
				n.ConfigBucket(), protocol.AuditKeysKey)
		}
		if slices.ContainsFunc(keys, func(k protocol.AuditKey) bool { return k.Kid == key.Kid }) {
			return keys, nil
		}
		keys = append(keys, key)
		b, _ := json.Marshal(keys)
		_, err = kv.Update(ctx, protocol.AuditKeysKey, b, e.Revision())
		if err == nil {
			return keys, nil
		}
		if !casConflict(err) {
			return nil, fmt.Errorf("bus: writing %s in %s: %w", protocol.AuditKeysKey, n.ConfigBucket(), err)
		}
	}
	return nil, fmt.Errorf("bus: %s in %s changed %d times while this worker added its key; start it again", protocol.AuditKeysKey, n.ConfigBucket(), maxKeyWrites)
}

// casConflict reports whether a key-value write lost a compare-and-set.
func casConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
