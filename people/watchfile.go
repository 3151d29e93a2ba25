package people

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultFileCheck is how often a [FileWatch] reads its file.
const DefaultFileCheck = time.Second

// FileWatch calls a function with a file's content when it starts and
// whenever the content changes after, reading the file every so often:
// a running service follows its directory file (or an older auth file)
// without a restart. Content, not the modification time, tells a change,
// so that two writes within one tick of the file system's clock are both
// seen.
//
// It has the lifecycle of a background service: Start, then Stop.
type FileWatch struct {
	path    string
	every   time.Duration
	changed func(ctx context.Context, content []byte) error
	log     zerolog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewFileWatch returns a watch of the file at path that calls changed
// with its content. every is how often the file is read; 0 means
// [DefaultFileCheck].
func NewFileWatch(path string, every time.Duration, changed func(ctx context.Context, content []byte) error, log zerolog.Logger) *FileWatch {
	return &FileWatch{path: path, every: cmp.Or(every, DefaultFileCheck), changed: changed, log: log}
}

// Start reads the file and calls changed with it, returning its error (or
// why the file cannot be read), and then watches the file until Stop. A
// later content that changed refuses is logged at error with the file's
// path, and the next change is tried again.
func (w *FileWatch) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return fmt.Errorf("people: already watching %s", w.path)
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return fmt.Errorf("people: reading %s: %w", w.path, err)
	}
	if err := w.changed(ctx, b); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel, w.done = cancel, make(chan struct{})
	go w.run(wctx, sha256.Sum256(b), w.done)
	return nil
}

// run reads the file every w.every until ctx ends.
func (w *FileWatch) run(ctx context.Context, last [sha256.Size]byte, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	var failed error
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(w.path)
		if err != nil {
			// Said once, until the file is back.
			if failed == nil || failed.Error() != err.Error() {
				w.log.Error().Err(err).Str("file", w.path).Msg("people: the file cannot be read; what was read before stays")
			}
			failed = err
			continue
		}
		failed = nil
		sum := sha256.Sum256(b)
		if bytes.Equal(sum[:], last[:]) {
			continue
		}
		last = sum
		if err := w.changed(ctx, b); err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error().Err(err).Str("file", w.path).Msg("people: refused the changed file; what was read before stays. Fix the file")
		}
	}
}

// Stop stops watching and waits for the watch, or for ctx. Stopping a
// watch that does not run, or stopping twice, does nothing.
func (w *FileWatch) Stop(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		w.cancel, w.done = nil, nil
		return nil
	case <-ctx.Done():
		return fmt.Errorf("people: stopping the watch of %s: %w", w.path, context.Cause(ctx))
	}
}
