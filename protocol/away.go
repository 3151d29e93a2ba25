package protocol

// An absence is a run of the built-in flow AbsenceFlow: a person away
// names a delegate who, from its start to its end, decides their
// assignments and claims and holds the roles they delegate. Its run
// waits on one approval of AbsenceAction, assigned to the person alone,
// due at the absence's end: approving it ends the absence early, its
// deadline ends it by itself. Its audit chain records who delegated what
// to whom, for when, and how it ended.
const (
	AbsenceFlow   = "away"
	AbsenceAction = "end_absence"
)
