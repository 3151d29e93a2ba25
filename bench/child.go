package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// childStopWait bounds how long a child takes to shut down once its
// standard input is closed.
const childStopWait = 30 * time.Second

// childProc is the bench binary run again as a child process: a server
// node or a worker. It is in a process group of its own, so that a
// terminal's ^C reaches only this process, which drains and then stops
// it, and it exits when its standard input closes, so that it does not
// outlive this process.
type childProc struct {
	what  string // "server process" or "floor worker process", for errors
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// stderr keeps the end of the child's standard error, for errors.
	stderr *tailBuffer
	// exited is closed once the child has exited; waitErr is then how.
	exited  chan struct{}
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// startChild starts the bench binary with env added to this process's
// environment, copying its standard error to stderr, and returns once
// it has printed lines lines on its standard output, which it returns.
// It gives up after wait, or when ctx is done, and kills the child.
func startChild(ctx context.Context, what string, env []string, lines int, wait time.Duration, stderr io.Writer) (_ *childProc, _ []string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding the bench binary to run the %s: %w", what, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	tail := &tailBuffer{max: 4 << 10}
	cmd.Stderr = io.MultiWriter(stderr, tail)
	cmd.SysProcAttr = childProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the %s: %w", what, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the %s: %w", what, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the %s %s: %w", what, exe, err)
	}
	p := &childProc{what: what, cmd: cmd, stdin: stdin, stderr: tail, exited: make(chan struct{})}
	type result struct {
		lines []string
		err   error
	}
	got := make(chan result, 1)
	go func() {
		r := bufio.NewReader(stdout)
		var res result
		for range lines {
			s, err := r.ReadString('\n')
			if err != nil {
				res.err = fmt.Errorf("reading its output: %w", err)
				break
			}
			res.lines = append(res.lines, strings.TrimSpace(s))
		}
		got <- res
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var (
		res  result
		read bool
	)
	select {
	case res = <-got:
		read = true
	case <-timer.C:
		res.err = fmt.Errorf("it was not ready within %s", wait)
	case <-ctx.Done():
		res.err = ctx.Err()
	}
	if res.err != nil {
		// Kill closes the child's end of stdout, so the reader returns.
		_ = cmd.Process.Kill()
		if !read {
			<-got
		}
		werr := cmd.Wait()
		return nil, nil, errors.Join(fmt.Errorf("starting the %s: %w", what, res.err), p.describeExit(werr))
	}
	// Nothing reads stdout any more, so Wait may close it.
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, res.lines, nil
}

// pid is the child's process id.
func (p *childProc) pid() int { return p.cmd.Process.Pid }

// failure is how the child ended if it ended before it was stopped.
func (p *childProc) failure() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s %d ended before it was stopped: %w", p.what, p.pid(), p.describeExit(p.waitErr))
	default:
		return nil
	}
}

// stop closes the child's standard input, which makes it shut down, and
// waits for it to exit, killing it if it takes longer than childStopWait.
// Stopping twice is safe.
func (p *childProc) stop() error {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		timer := time.NewTimer(childStopWait)
		defer timer.Stop()
		select {
		case <-p.exited:
			if p.waitErr != nil {
				p.stopErr = fmt.Errorf("%s %d: %w", p.what, p.pid(), p.describeExit(p.waitErr))
			}
		case <-timer.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
			p.stopErr = fmt.Errorf("%s %d did not stop within %s; killed it (%w)", p.what, p.pid(), childStopWait, p.describeExit(p.waitErr))
		}
	})
	return p.stopErr
}

// describeExit describes how a child that failed ended, with the end of
// what it wrote to its standard error.
func (p *childProc) describeExit(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("process ended: %s", exit.ProcessState)
	}
	if err != nil {
		if s := strings.TrimSpace(p.stderr.String()); s != "" {
			err = fmt.Errorf("%w; its last output: %s", err, s)
		}
	}
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
