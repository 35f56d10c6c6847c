package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/syncback"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// dockerSandbox is one running container and the agent session with its
// init.
type dockerSandbox struct {
	*agentbox.Session
	b        *Backend
	e        *engine
	cid      string
	conn     *attachConn
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
	execs    atomic.Int64

	statMu   sync.Mutex
	lastStat cgroupStats // the cgroup's last figures (kept once it is gone)
}

// Exec starts a process through the agent.
func (s *dockerSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.Closed() {
		return nil, s.ClosedErr("exec")
	}
	// The OOM-kill count before the process starts tells whether a SIGKILL
	// it dies of was the memory limit's (0 before the first: the agent was
	// alone until then).
	var oom int64
	if s.memLimit && s.execs.Add(1) > 1 {
		oom = s.cg.oomKills()
	}
	p, err := s.Session.Exec(ctx, req)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, s: s, oomBefore: oom}, nil
}

// Stats reads the container's cgroup.
func (s *dockerSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.Closed() {
		return sandbox.Stats{}, s.ClosedErr("stats")
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
	if s.Closed() {
		return sandbox.SyncReport{}, s.ClosedErr("sync")
	}
	return syncback.Run(ctx, s.Client, syncback.Sandbox{
		ID: s.ID(), Agent: AgentPath, Roots: s.overlays, Inside: s.inside, Skip: s.syncSkip, Guard: s.guard, UID: s.uid, GID: s.gid,
		Started: s.started, Audit: s.Audit, Log: s.Log,
	})
}

// teardown ends the sandbox (agentbox runs it once): close the agent
// channel, remove the container (SIGKILL to its init ends every process in
// its pid namespace) with its overlay volumes, then the state directory.
func (s *dockerSandbox) teardown(why string) error {
	cs := s.cg.stats()
	s.statMu.Lock()
	s.lastStat = cs
	s.statMu.Unlock()
	s.Client.Close()
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
	s.Audit.Emit(audit.Event{Sandbox: s.ID(), Type: audit.TypeDestroy, Message: why,
		Fields: map[string]any{"memory_peak_bytes": cs.MemoryPeak, "oom_kills": cs.OOMKills}})
	return errors.Join(errs...)
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
		if p.s.Cause.TimedOut.Load() {
			return sandbox.ExitStatus{Code: 128 + sandbox.SIGKILL, Signal: sandbox.SIGKILL, TimedOut: true}, nil
		}
		return st, err
	}
	if st.Signal == sandbox.SIGKILL && p.s.memLimit {
		var oom int64
		if p.s.Closed() {
			p.s.statMu.Lock()
			oom = p.s.lastStat.OOMKills
			p.s.statMu.Unlock()
		} else {
			oom = p.s.cg.oomKills()
		}
		if oom > p.oomBefore {
			st.OOM = true
			p.s.Audit.Emit(audit.Event{Sandbox: p.s.ID(), Type: audit.TypeLimit, Message: "killed by the memory limit",
				Fields: map[string]any{"limit": "memory", "pid": p.PID()}})
		}
	}
	if st.Signal == sandbox.SIGKILL && p.s.Cause.TimedOut.Load() {
		st.TimedOut = true
	}
	return st, nil
}

// HostIDs returns the host uid and gid the container's processes run as
// (its lease's, on a root server). See sandbox.HostIdentity.
func (s *dockerSandbox) HostIDs() (uid, gid int) { return s.uid, s.gid }
