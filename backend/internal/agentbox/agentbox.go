// Package agentbox is what every agent-backed backend (docker, gVisor,
// microVMs, Kubernetes) shares of a running sandbox: the start of its
// session with the in-sandbox agent (Connect: the Hello, watching the
// sandbox's runtime die meanwhile) and the sandbox's life around that
// session (Session: its ID, files, ports, exec gating, wall timeout and
// one teardown). Keeping it once keeps the backends alike: a start that
// fails, or a call on an ended sandbox, gets the same error kind whatever
// the backend. It holds no backend's resources: each backend's teardown
// removes its own. The agent is untrusted; nothing here believes it more
// than package agent does.
package agentbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/ending"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/sandbox"
)

// Runtime is what hosts a sandbox's agent, as Connect watches it: Died is
// closed when it ended (the container, runsc, the VM, the pod's attach
// stream), and Left, called only then, says what it left for the error
// (an exit status, the tail of its output).
type Runtime struct {
	What string // "container", "runsc", "the VM", "the pod's attach stream"
	Died <-chan struct{}
	Left func() string
}

// Connect starts the agent session over conn (opts and gc from
// agent.SessionFor) and speaks Hello, registering the client's close on u.
// A start fails with one kind on every backend:
//   - the runtime died first, or while Hello failed: ErrUnavailable,
//     naming what it left;
//   - ctx ended: ErrTimeout;
//   - the agent refused the session with a kind (a bad configuration:
//     ErrInvalid): that kind;
//   - anything else (a broken channel, a protocol violation, the session
//     closed under it): ErrUnavailable.
func Connect(ctx context.Context, conn io.ReadWriteCloser, opts agent.ClientOptions, gc agent.GuestConfig, rt Runtime, u *undo.Stack) (*agent.Client, error) {
	client, err := agent.NewClient(conn, opts)
	if err != nil {
		return nil, fmt.Errorf("agent: %v: %w", err, sandbox.ErrUnavailable)
	}
	u.Push(func() { client.Close() })
	helloErr := make(chan error, 1)
	go func() { helloErr <- client.Hello(ctx, gc) }()
	select {
	case err = <-helloErr:
	case <-rt.Died:
		return nil, died(rt)
	}
	if err == nil {
		return client, nil
	}
	// A runtime that dies as Hello fails is why it failed: give it a
	// moment to be seen.
	select {
	case <-rt.Died:
		return nil, died(rt)
	case <-time.After(100 * time.Millisecond):
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("agent hello: %w", errors.Join(ctx.Err(), sandbox.ErrTimeout))
	}
	if hasKind(err) {
		return nil, err // the agent's own words, "agent hello: ..."
	}
	return nil, fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
}

func died(rt Runtime) error {
	left := ""
	if rt.Left != nil {
		left = rt.Left()
	}
	if left == "" {
		return fmt.Errorf("%s exited during start: %w", rt.What, sandbox.ErrUnavailable)
	}
	return fmt.Errorf("%s exited during start: %s: %w", rt.What, left, sandbox.ErrUnavailable)
}

// kinds are the error kinds an agent's refusal of the session carries
// through; others (a session closed under it: ErrClosed) mean the sandbox
// could not start: unavailable.
var kinds = []error{errdefs.ErrInvalid, errdefs.ErrNotFound, errdefs.ErrPermission, errdefs.ErrLimit,
	errdefs.ErrUnavailable, errdefs.ErrNotSupported}

func hasKind(err error) bool {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// Session is a running sandbox's agent session and life: a backend's
// sandbox type embeds it for ID, Done, Files, DialPort and Destroy, starts
// processes through Exec, and gives it the teardown of its own resources.
// Safe for concurrent use.
type Session struct {
	Client *agent.Client
	Log    *slog.Logger
	Audit  audit.Sink
	// Cause is why the sandbox ended (read by the backend's process
	// wrappers and stats).
	Cause ending.Cause

	id       string
	teardown func(why string) error
	timer    atomic.Pointer[time.Timer]
	done     chan struct{}
	once     sync.Once
	tdErr    error
}

// NewSession returns the session of sandbox id over client. teardown runs
// once, when the sandbox ends for whatever reason (Destroy, its timeout,
// its runtime's death): it closes the client and removes what the backend
// made, and its error is Destroy's.
func NewSession(id string, client *agent.Client, log *slog.Logger, sink audit.Sink, teardown func(why string) error) *Session {
	return &Session{Client: client, Log: log, Audit: sink, id: id, teardown: teardown, done: make(chan struct{})}
}

// ID is the sandbox's ID.
func (s *Session) ID() string { return s.id }

// Done is closed once the sandbox has ended and its teardown ran.
func (s *Session) Done() <-chan struct{} { return s.done }

// ClosedErr is the error of op on the ended sandbox (ErrClosed, joined
// with ErrTimeout or ErrLimit when its timeout or memory limit ended it).
func (s *Session) ClosedErr(op string) error { return s.Cause.Err(s.id, op) }

// Closed reports whether the sandbox has ended (or is ending).
func (s *Session) Closed() bool { return s.Cause.Closed.Load() }

// Files is the agent's file API, run inside as the sandbox's user.
func (s *Session) Files() sandbox.Files { return s.Client.Files() }

// Exec starts req through the agent unless the sandbox ended (a start the
// end interrupted fails as ClosedErr). Backends wrap the process to
// report what only the host knows (see Process).
func (s *Session) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	return s.Cause.Exec(ctx, s.id, s.Client.Exec, req)
}

// DialPort opens a stream to port on the sandbox's loopback through the
// agent. See sandbox.PortDialer.
func (s *Session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.Closed() {
		return nil, s.ClosedErr("dial")
	}
	return s.Client.Dial(ctx, port)
}

// Destroy ends the sandbox and returns its teardown's error. Idempotent.
func (s *Session) Destroy(ctx context.Context) error {
	s.End("destroyed")
	return s.tdErr
}

// SetTimeout ends the sandbox d from now, as its wall timeout (d <= 0:
// never). Call it once, at start.
func (s *Session) SetTimeout(d time.Duration) {
	if d > 0 {
		s.timer.Store(time.AfterFunc(d, s.timeout))
	}
}

func (s *Session) timeout() {
	s.Cause.TimedOut.Store(true)
	s.Audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.End("timeout")
}

// Watch ends the sandbox when its agent session breaks or any of died is
// closed (its runtime ended on its own), unless it ended first; before,
// when set, runs first (what must be read before the teardown, such as an
// OOM count). Run it in a goroutine.
func (s *Session) Watch(before func(), died ...<-chan struct{}) {
	gone := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(gone) }) }
	for _, d := range append(died, s.Client.Done()) {
		go func() {
			select {
			case <-d:
				stop()
			case <-s.done:
			}
		}()
	}
	select {
	case <-gone:
	case <-s.done:
		return
	}
	if before != nil && !s.Closed() {
		before()
	}
	s.End("sandbox exited")
}

// End tears the sandbox down once, saying why: it is marked ended (every
// call fails with ClosedErr from now), its timeout stopped, the backend's
// teardown run, Done closed.
func (s *Session) End(why string) {
	s.once.Do(func() {
		t0 := time.Now()
		s.Cause.Closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		if err := s.teardown(why); err != nil {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, err)
		}
		s.Log.Debug("sandbox ended", "why", why, "teardown", time.Since(t0))
		close(s.done)
	})
}

// Process reports a process the sandbox's end killed (its timeout, its
// memory limit) as killed for that reason, not as a lost connection.
type Process struct {
	sandbox.Process
	S *Session
}

// Wait waits for the process; see Process.
func (p *Process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	return p.S.Cause.Status(ctx, p.S.done, st, err)
}
