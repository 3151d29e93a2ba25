package bus

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/interlockhq/interlock/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// secretKey is the key of the generated secret in the keys bucket.
const secretKey = "resume-token-secret"

// SecretSize is the size of a generated resume-token secret.
const SecretSize = 32

// StoredSecret returns the resume-token secret kept in the keys bucket,
// generating it on first use, so that every worker of a deployment shares
// it without configuration. Anyone who can read that bucket can mint resume
// tokens: production deployments should configure a secret instead.
func StoredSecret(ctx context.Context, js jetstream.JetStream, n wire.Names, replicas int) ([]byte, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.KeysBucket(), Description: "Interlock generated secrets", History: 1,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("bus: creating bucket %s: %w", n.KeysBucket(), err)
	}
	secret := make([]byte, SecretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("bus: generating secret: %w", err)
	}
	if _, err := kv.Create(ctx, secretKey, secret); err == nil {
		return secret, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("bus: storing secret in %s: %w", n.KeysBucket(), err)
	}
	e, err := kv.Get(ctx, secretKey)
	if err != nil {
		return nil, fmt.Errorf("bus: reading secret from %s: %w", n.KeysBucket(), err)
	}
	if len(e.Value()) < SecretSize {
		return nil, fmt.Errorf("bus: secret in %s is %d bytes, want %d", n.KeysBucket(), len(e.Value()), SecretSize)
	}
	return e.Value(), nil
}
