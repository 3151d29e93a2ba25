package engine

import "github.com/interlockhq/interlock/protocol"

// MaxNameLen is the longest flow name or run id.
const MaxNameLen = protocol.MaxNameLen

// CheckName reports whether s is a valid flow name or run id (see
// [protocol.CheckName]).
func CheckName(what, s string) error { return protocol.CheckName(what, s) }

// truncate cuts s to at most n bytes, on a rune boundary, and marks the cut.
func truncate(s string, n int) string { return protocol.Truncate(s, n) }
