package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/ending"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/syncback"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// dockerSandbox is one running container and the agent client talking to
// its init.
type dockerSandbox struct {
	id       string
	b        *Backend
	e        *engine
	cid      string
	log      *slog.Logger
	audit    audit.Sink
	client   *agent.Client
	conn     *attachConn
	exited   <-chan container.WaitResponse // the container's init exited
	cg       *containerCgroup
	state    string
	memLimit bool
	// Write-back of the overlay volumes: the host directories, the
	// sandbox's own mounts below them, the rules, the owner of what is
	// written back, and when the sandbox started.
	overlays []string
	inside   map[string]string // an overlay's inside path, when not its host path
	syncSkip []string
	guard    *policy.ConfigGuard
	uid, gid int
	lease    *idmap.Lease // the host id range, released at the end (nil: none)
	started  time.Time
	timer    atomic.Pointer[time.Timer]
	execs    atomic.Int64

	statMu   sync.Mutex
	lastStat cgroupStats // the cgroup's last figures (kept once it is gone)

	done     chan struct{}
	teardown sync.Once
	tdErr    error
	cause    ending.Cause // why it ended
}

func (s *dockerSandbox) ID() string { return s.id }

func (s *dockerSandbox) Done() <-chan struct{} { return s.done }

func (s *dockerSandbox) errClosed(op string) error { return s.cause.Err(s.id, op) }

// Exec starts a process through the agent.
func (s *dockerSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.cause.Closed.Load() {
		return nil, s.errClosed("exec")
	}
	// The OOM-kill count before the process starts tells whether a SIGKILL
	// it dies of was the memory limit's (0 before the first: the agent was
	// alone until then).
	var oom int64
	if s.memLimit && s.execs.Add(1) > 1 {
		oom = s.cg.oomKills()
	}
	p, err := s.client.Exec(ctx, req)
	if err != nil {
		if s.cause.Closed.Load() {
			return nil, s.errClosed("exec")
		}
		return nil, err
	}
	return &process{Process: p, s: s, oomBefore: oom}, nil
}

// Files is the agent's file API: it runs as the sandbox's user inside the
// container, under the same mounts as its processes.
func (s *dockerSandbox) Files() sandbox.Files { return s.client.Files() }

// Stats reads the container's cgroup.
func (s *dockerSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.cause.Closed.Load() {
		return sandbox.Stats{}, s.errClosed("stats")
	}
	cs := s.cg.stats()
	s.statMu.Lock()
	s.lastStat = cs
	s.statMu.Unlock()
	return sandbox.Stats{MemoryBytes: cs.MemoryBytes, MemoryPeakBytes: cs.MemoryPeak, CPUNanos: cs.CPUNanos, Pids: cs.Pids}, nil
}

// Sync writes back what the sandbox changed in its overlaid host
// directories, each change decided by the guard. See sandbox.Syncer.
func (s *dockerSandbox) Sync(ctx context.Context) (sandbox.SyncReport, error) {
	if len(s.overlays) == 0 {
		return sandbox.SyncReport{}, nil
	}
	if s.cause.Closed.Load() {
		return sandbox.SyncReport{}, s.errClosed("sync")
	}
	return syncback.Run(ctx, s.client, syncback.Sandbox{
		ID: s.id, Agent: AgentPath, Roots: s.overlays, Inside: s.inside, Skip: s.syncSkip, Guard: s.guard, UID: s.uid, GID: s.gid,
		Started: s.started, Audit: s.audit, Log: s.log,
	})
}

// Destroy ends every process and removes every host resource. Idempotent.
func (s *dockerSandbox) Destroy(ctx context.Context) error {
	s.end("destroyed")
	return s.tdErr
}

// watch ends the sandbox when the container exits on its own (the agent
// died, the memory limit killed it) or the channel broke.
func (s *dockerSandbox) watch() {
	select {
	case <-s.exited:
	case <-s.client.Done():
	case <-s.done:
		return
	}
	s.end("sandbox exited")
}

func (s *dockerSandbox) timeout() {
	s.cause.TimedOut.Store(true)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.end("timeout")
}

// end tears the sandbox down once: close the agent channel, remove the
// container (SIGKILL to its init ends every process in its pid namespace)
// with its overlay volumes, then the state directory.
func (s *dockerSandbox) end(why string) {
	s.teardown.Do(func() {
		t0 := time.Now()
		s.cause.Closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		cs := s.cg.stats()
		s.statMu.Lock()
		s.lastStat = cs
		s.statMu.Unlock()
		s.client.Close()
		var errs []error
		if err := removeContainer(s.e, s.cid); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(s.state); err != nil {
			errs = append(errs, fmt.Errorf("remove state: %w", err))
		}
		if len(errs) == 0 && s.lease != nil {
			s.lease.Release() // nothing of the container's is left running as it
		}
		if len(errs) > 0 {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, errors.Join(errs...))
		}
		s.log.Debug("sandbox ended", "why", why, "teardown", time.Since(t0))
		s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDestroy, Message: why,
			Fields: map[string]any{"memory_peak_bytes": cs.MemoryPeak, "oom_kills": cs.OOMKills}})
		close(s.done)
	})
}

// process annotates the agent's exit status with what only the host
// knows: the memory limit (an OOM kill in the container's cgroup) and the
// sandbox's wall timeout.
type process struct {
	sandbox.Process
	s         *dockerSandbox
	oomBefore int64
}

func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	if err != nil {
		if p.s.cause.TimedOut.Load() {
			return sandbox.ExitStatus{Code: 128 + sandbox.SIGKILL, Signal: sandbox.SIGKILL, TimedOut: true}, nil
		}
		return st, err
	}
	if st.Signal == sandbox.SIGKILL && p.s.memLimit {
		var oom int64
		if p.s.cause.Closed.Load() {
			p.s.statMu.Lock()
			oom = p.s.lastStat.OOMKills
			p.s.statMu.Unlock()
		} else {
			oom = p.s.cg.oomKills()
		}
		if oom > p.oomBefore {
			st.OOM = true
			p.s.audit.Emit(audit.Event{Sandbox: p.s.id, Type: audit.TypeLimit, Message: "killed by the memory limit",
				Fields: map[string]any{"limit": "memory", "pid": p.PID()}})
		}
	}
	if st.Signal == sandbox.SIGKILL && p.s.cause.TimedOut.Load() {
		st.TimedOut = true
	}
	return st, nil
}

// DialPort opens a stream to port on the container's loopback through the
// agent. See sandbox.PortDialer.
func (s *dockerSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.cause.Closed.Load() {
		return nil, s.errClosed("dial")
	}
	return s.client.Dial(ctx, port)
}

// HostIDs returns the host uid and gid the container's processes run as
// (its lease's, on a root server). See sandbox.HostIdentity.
func (s *dockerSandbox) HostIDs() (uid, gid int) { return s.uid, s.gid }
