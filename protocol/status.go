package protocol

// Status is where a run stands: the status of its checkpoint.
type Status string

// Run statuses.
const (
	// StatusRunning: a transition is in flight (a step's result was
	// recorded mid-node). At rest a run is waiting or finished.
	StatusRunning   Status = "running"
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
)

// Statuses returns every status, in the order of docs/protocol.md §5.
func Statuses() []Status {
	return []Status{StatusRunning, StatusWaiting, StatusCompleted, StatusFailed, StatusCancelled, StatusExpired}
}

// Finished reports whether the status is final: completed, failed,
// cancelled or expired.
func (s Status) Finished() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled || s == StatusExpired
}

// FinishedStatuses returns the final statuses, each with a stream of its
// own in the finished-runs index: completed, failed, cancelled and
// expired.
func FinishedStatuses() []Status {
	var out []Status
	for _, s := range Statuses() {
		if s.Finished() {
			out = append(out, s)
		}
	}
	return out
}
