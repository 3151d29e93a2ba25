//go:build unix

package bus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// LockFile is the name of the lock file in the data dir. It holds the PID
// of the process that serves the dir.
const LockFile = "interlock.lock"

// dirLock is an exclusive flock on the data dir's lock file, held while a
// server runs on the dir. The kernel releases it if the process dies.
type dirLock struct {
	f    *os.File
	once sync.Once
}

// lockDir takes the data dir's lock, or fails naming the PID that holds it.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bus: opening lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("bus: data dir %s is in use by another Interlock server (%s, lock file %s): stop it first, or give this one another --data-dir",
				dir, holder(path), path)
		}
		return nil, fmt.Errorf("bus: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bus: writing lock file %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// holder says which process holds the lock file at path.
func holder(path string) string {
	b, err := os.ReadFile(path)
	pid := strings.TrimSpace(string(b))
	if err != nil || pid == "" {
		return "PID unknown"
	}
	return "PID " + pid
}

// release releases the lock; the file stays, for the next server. It is
// safe to call twice, and on nil.
func (l *dirLock) release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
	})
}
