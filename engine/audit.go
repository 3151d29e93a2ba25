package engine

import "github.com/interlockhq/interlock/protocol"

// seal chains the transition's new audit records onto the run's chain, in
// outbox order, before the checkpoint that holds them is written: each
// gets its position, the previous record's hash, its own hash and its
// signature, and the checkpoint keeps the head.
func (t *txn) seal() error {
	for i := range t.cp.Outbox {
		rec, ok := t.cp.Outbox[i].Data.(*protocol.AuditRecord)
		if !ok || rec.Hash != "" {
			continue
		}
		head := protocol.AuditHead{}
		if t.cp.Audit != nil {
			head = *t.cp.Audit
		}
		rec.Seq, rec.Prev = head.Records+1, head.Hash
		if err := t.r.signer.seal(rec); err != nil {
			return err
		}
		t.cp.Audit = &protocol.AuditHead{Records: rec.Seq, Hash: rec.Hash}
	}
	return nil
}
