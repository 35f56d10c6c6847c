package gvisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/ending"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// gvSandbox is one running gVisor sandbox: the `runsc run` process, its
// cgroup and the agent client talking to the container's init.
type gvSandbox struct {
	id       string
	b        *Backend
	log      *slog.Logger
	audit    audit.Sink
	cmd      *exec.Cmd
	waited   <-chan struct{} // closed when `runsc run` has exited
	client   *agent.Client
	cg       *sandboxCgroup
	bundle   string
	memLimit bool
	// Write-back of the overlay (plan.Overlay): the host paths, the
	// sandbox's own mounts below them, the rules, the owner of what is
	// written back, and when the sandbox started.
	syncRoots  []string
	syncSkip   []string
	syncInside map[string]string // host root -> its path inside, when elsewhere
	guard      *policy.ConfigGuard
	uid, gid   int
	lease      *idmap.Lease // host ids of its user namespace (nil: none)
	// runscVersion and platform: what runs it (Runtime).
	runscVersion, platform string
	started                time.Time
	oomBefore              int64                      // the cgroup's OOM kills at start (always 0: the cgroup is new)
	timer                  atomic.Pointer[time.Timer] // the wall timeout (set after start, read by end)

	done     chan struct{}
	teardown sync.Once
	tdErr    error
	cause    ending.Cause // why it ended
}

func (s *gvSandbox) ID() string { return s.id }

// HostIDs returns the host uid and gid of the sandbox's user inside (the
// caller's when no range is leased).
func (s *gvSandbox) HostIDs() (uid, gid int) {
	if s.lease == nil || os.Geteuid() != 0 {
		return s.uid, s.gid
	}
	return s.lease.UID + s.uid, s.lease.GID + s.gid
}

func (s *gvSandbox) Done() <-chan struct{} { return s.done }

// Runtime says which runsc runs the sandbox and on which platform.
func (s *gvSandbox) Runtime() map[string]string {
	return map[string]string{"runsc_version": s.runscVersion, "platform": s.platform}
}

func (s *gvSandbox) errClosed(op string) error { return s.cause.Err(s.id, op) }

// Exec starts a process through the agent.
func (s *gvSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.cause.Exec(ctx, s.id, s.client.Exec, req)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, s: s}, nil
}

// Files is the agent's file API: it runs as the sandbox's user inside
// gVisor, under the same mounts as the sandbox's processes.
func (s *gvSandbox) Files() sandbox.Files { return s.client.Files() }

// Stats reads the sandbox's cgroup. Memory and CPU include gVisor's own
// (the sentry and gofer run in the cgroup); Pids is not known on the host.
func (s *gvSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.cause.Closed.Load() {
		return sandbox.Stats{}, s.errClosed("stats")
	}
	cs := s.cg.stats()
	return sandbox.Stats{MemoryBytes: cs.MemoryBytes, MemoryPeakBytes: cs.MemoryPeak, CPUNanos: cs.CPUNanos}, nil
}

// Destroy ends every process and removes every host resource. Idempotent.
func (s *gvSandbox) Destroy(ctx context.Context) error {
	s.end("destroyed")
	return s.tdErr
}

// watch ends the sandbox when `runsc run` exits on its own (the agent
// died, the memory limit killed the sentry).
func (s *gvSandbox) watch() {
	select {
	case <-s.waited:
	case <-s.client.Done():
		// The channel broke; the container may still run: end it.
	}
	if !s.cause.Closed.Load() && s.memLimit {
		// The cgroup is ours and outlives runsc: its OOM count is final
		// once runsc has exited.
		// A broken channel with the container still running (an agent
		// that violated the protocol) must not block the teardown.
		select {
		case <-s.waited:
			if n := s.cg.stats().OOMKills; n > s.oomBefore {
				s.cause.OOM.Store(true)
				s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox killed by the memory limit",
					Fields: map[string]any{"limit": "memory", "oom_kills": n - s.oomBefore}})
			}
		case <-time.After(5 * time.Second):
		}
	}
	s.end("sandbox exited")
}

func (s *gvSandbox) timeout() {
	s.cause.TimedOut.Store(true)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.end("timeout")
}

// end tears the sandbox down once: close the agent channel (the agent, the
// container's init, exits and the container ends with it), make sure with
// runsc kill/delete, then remove the cgroup leftovers and the
// bundle.
func (s *gvSandbox) end(why string) {
	s.teardown.Do(func() {
		t0 := time.Now()
		defer func() { s.log.Debug("sandbox ended", "why", why, "teardown", time.Since(t0)) }()
		s.cause.Closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		cs := s.cg.stats()
		s.client.Close()
		select {
		case <-s.waited:
		case <-time.After(2 * time.Second):
		}
		s.log.Debug("runsc exited", "after", time.Since(t0))
		s.b.forceStop(s.id, s.cmd, s.waited)
		var errs []error
		if err := s.cg.remove(); err != nil {
			errs = append(errs, err)
		}
		if err := s.b.unmountImageRoot(s.bundle, s.id); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(s.bundle); err != nil {
			errs = append(errs, fmt.Errorf("remove bundle: %w", err))
		}
		s.lease.Release() // runsc and its gofer are gone
		if len(errs) > 0 {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, errors.Join(errs...))
		}
		s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDestroy, Message: why,
			Fields: map[string]any{"memory_peak_bytes": cs.MemoryPeak, "oom": s.cause.OOM.Load()}})
		close(s.done)
	})
}

// process annotates the agent's exit status with what only the host knows:
// the sandbox's wall timeout and a memory-limit kill (which in gVisor ends
// the whole sandbox: the host OOM killer kills the user-space kernel).
type process struct {
	sandbox.Process
	s *gvSandbox
}

// Wait reports a process the sandbox's end killed (timeout, memory
// limit) as killed for that reason.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	return p.s.cause.Status(ctx, p.s.done, st, err)
}

// DialPort opens a stream to port on the sandbox's loopback (gVisor's
// netstack) through the agent. See sandbox.PortDialer.
func (s *gvSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.cause.Closed.Load() {
		return nil, s.errClosed("dial")
	}
	return s.client.Dial(ctx, port)
}
