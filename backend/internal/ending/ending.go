// Package ending records why a sandbox ended and says so in what is
// asked of it afterwards: every call on an ended sandbox fails with
// sandbox.ErrClosed, joined with ErrTimeout or ErrLimit when its timeout
// or memory limit ended it, and a process the end killed reports that as
// its status rather than as a lost connection. The agent-driven backends
// (gVisor, docker, microvm) share it so that they word it alike.
package ending

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/airlock-dev/airlock/sandbox"
)

// Cause is why a sandbox ended, as its backend records it. The zero
// value is a running sandbox; safe for concurrent use.
type Cause struct {
	Closed   atomic.Bool // Destroy ran or the sandbox died
	TimedOut atomic.Bool // its timeout ended it
	OOM      atomic.Bool // its memory limit ended it
}

// Err is the error of op on sandbox id once it has ended.
func (c *Cause) Err(id, op string) error {
	switch {
	case c.TimedOut.Load():
		return fmt.Errorf("sandbox %q: %s: timed out: %w", id, op, errors.Join(sandbox.ErrClosed, sandbox.ErrTimeout))
	case c.OOM.Load():
		return fmt.Errorf("sandbox %q: %s: killed by the memory limit: %w", id, op, errors.Join(sandbox.ErrClosed, sandbox.ErrLimit))
	}
	return fmt.Errorf("sandbox %q: %s: %w", id, op, sandbox.ErrClosed)
}

// Exec starts req with start unless sandbox id has ended; a start that
// failed because the sandbox ended meanwhile fails with Err.
func (c *Cause) Exec(ctx context.Context, id string, start func(context.Context, sandbox.ExecRequest) (sandbox.Process, error), req sandbox.ExecRequest) (sandbox.Process, error) {
	if c.Closed.Load() {
		return nil, c.Err(id, "exec")
	}
	p, err := start(ctx, req)
	if err != nil && c.Closed.Load() {
		return nil, c.Err(id, "exec")
	}
	return p, err
}

// Status turns the outcome of a process's Wait into its status when the
// sandbox's end (done closed) killed it by its timeout or memory limit:
// the process was SIGKILLed for that reason, not lost.
func (c *Cause) Status(ctx context.Context, done <-chan struct{}, st sandbox.ExitStatus, err error) (sandbox.ExitStatus, error) {
	if err == nil || ctx.Err() != nil || !errors.Is(err, sandbox.ErrClosed) {
		return st, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return st, err
	}
	killed := sandbox.ExitStatus{Code: 128 + sandbox.SIGKILL, Signal: sandbox.SIGKILL}
	switch {
	case c.TimedOut.Load():
		killed.TimedOut = true
		return killed, nil
	case c.OOM.Load():
		killed.OOM = true
		return killed, nil
	}
	return st, err
}
