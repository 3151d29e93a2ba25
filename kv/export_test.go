package kv

// BeforeSweepPurge has s call f between SweepPending's read of a stale
// entry and its purge.
func BeforeSweepPurge(s *Store, f func(key string)) { s.beforeSweepPurge = f }
