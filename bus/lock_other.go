//go:build !unix

package bus

// LockFile is the name of the lock file in the data dir. On this system
// the data dir is not locked: run one server per dir.
const LockFile = "interlock.lock"

// dirLock is a no-op where flock is not available.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) release() {}
