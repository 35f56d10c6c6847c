package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// gvSandbox is one running gVisor sandbox: the `runsc run` process, its
// cgroup and the agent session with the container's init.
type gvSandbox struct {
	*agentbox.Session
	b        *Backend
	cmd      *exec.Cmd
	waited   <-chan struct{} // closed when `runsc run` has exited
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
	started    time.Time
	oomBefore  int64 // the cgroup's OOM kills at start (always 0: the cgroup is new)
	// runscVersion and platform: what runs it (Runtime).
	runscVersion, platform string
}

// HostIDs returns the host uid and gid of the sandbox's user inside (the
// caller's when no range is leased).
func (s *gvSandbox) HostIDs() (uid, gid int) {
	if s.lease == nil || os.Geteuid() != 0 {
		return s.uid, s.gid
	}
	return s.lease.UID + s.uid, s.lease.GID + s.gid
}

// Runtime says which runsc runs the sandbox and on which platform.
func (s *gvSandbox) Runtime() map[string]string {
	return map[string]string{"runsc_version": s.runscVersion, "platform": s.platform}
}

// Exec starts a process through the agent; a process the sandbox's end
// killed (timeout, memory limit: which in gVisor ends the whole sandbox,
// the host OOM killer killing the user-space kernel) reports that.
func (s *gvSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.Session.Exec(ctx, req)
	if err != nil {
		return nil, err
	}
	return &agentbox.Process{Process: p, S: s.Session}, nil
}

// Stats reads the sandbox's cgroup. Memory and CPU include gVisor's own
// (the sentry and gofer run in the cgroup); Pids is not known on the host.
func (s *gvSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.Closed() {
		return sandbox.Stats{}, s.ClosedErr("stats")
	}
	cs := s.cg.stats()
	return sandbox.Stats{MemoryBytes: cs.MemoryBytes, MemoryPeakBytes: cs.MemoryPeak, CPUNanos: cs.CPUNanos}, nil
}

// noteOOM records, before the teardown, a memory-limit kill that ended
// `runsc run` on its own: the cgroup is ours and outlives runsc, so its
// OOM count is final once runsc has exited. A broken channel with the
// container still running (an agent that violated the protocol) must not
// block the teardown.
func (s *gvSandbox) noteOOM() {
	if !s.memLimit {
		return
	}
	select {
	case <-s.waited:
		if n := s.cg.stats().OOMKills; n > s.oomBefore {
			s.Cause.OOM.Store(true)
			s.Audit.Emit(audit.Event{Sandbox: s.ID(), Type: audit.TypeLimit, Message: "sandbox killed by the memory limit",
				Fields: map[string]any{"limit": "memory", "oom_kills": n - s.oomBefore}})
		}
	case <-time.After(5 * time.Second):
	}
}

// teardown ends the sandbox (agentbox runs it once): close the agent
// channel (the agent, the container's init, exits and the container ends
// with it), make sure with runsc kill/delete, then remove the cgroup
// leftovers and the bundle.
func (s *gvSandbox) teardown(why string) error {
	t0 := time.Now()
	cs := s.cg.stats()
	s.Client.Close()
	select {
	case <-s.waited:
	case <-time.After(2 * time.Second):
	}
	s.Log.Debug("runsc exited", "after", time.Since(t0))
	s.b.forceStop(s.ID(), s.cmd, s.waited)
	var errs []error
	if err := s.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	if err := s.b.unmountImageRoot(s.bundle, s.ID()); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.bundle); err != nil {
		errs = append(errs, fmt.Errorf("remove bundle: %w", err))
	}
	s.lease.Release() // runsc and its gofer are gone
	s.Audit.Emit(audit.Event{Sandbox: s.ID(), Type: audit.TypeDestroy, Message: why,
		Fields: map[string]any{"memory_peak_bytes": cs.MemoryPeak, "oom": s.Cause.OOM.Load()}})
	return errors.Join(errs...)
}
