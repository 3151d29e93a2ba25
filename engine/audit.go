package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// seal chains the transition's new audit records onto the run's chain, in
// outbox order, before the checkpoint that holds them is written: each
// gets its position, the previous record's hash and its own hash, and the
// checkpoint keeps the head.
func (t *txn) seal() error {
	for i := range t.cp.Outbox {
		rec, ok := t.cp.Outbox[i].Data.(*AuditRecord)
		if !ok || rec.Hash != "" {
			continue
		}
		head := AuditHead{}
		if t.cp.Audit != nil {
			head = *t.cp.Audit
		}
		rec.Seq, rec.Prev = head.Records+1, head.Hash
		h, err := AuditHash(rec)
		if err != nil {
			return err
		}
		rec.Hash = h
		t.cp.Audit = &AuditHead{Records: rec.Seq, Hash: h}
	}
	return nil
}

// AuditHash returns the hash of an audit record: the hex SHA-256 of its
// canonical JSON (object keys sorted, no insignificant space, numbers as
// written) without its hash field. Anyone can recompute it from the record
// as published.
func AuditHash(rec *AuditRecord) (string, error) {
	c := *rec
	c.Hash = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("engine: encoding audit record: %w", err)
	}
	return CanonicalHash(b)
}

// CanonicalHash returns the hex SHA-256 of the canonical JSON of a JSON
// object, leaving out its "hash" member.
func CanonicalHash(obj []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", fmt.Errorf("engine: audit record is not a JSON object: %v", err)
	}
	delete(m, "hash")
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("engine: encoding audit record: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
