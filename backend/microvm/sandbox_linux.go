package microvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// vmSandbox is one running VM: the VMM process, its cgroup, its directory
// and the agent session with the guest's init.
type vmSandbox struct {
	*agentbox.Session
	b        *Backend
	vm       VM
	cg       *vmCgroup
	dir      string
	layout   layout
	restored bool
	// Write-back of the overlay (plan.Overlay), as gVisor's.
	syncRoots  []string
	syncSkip   []string
	syncLayers map[string]string // root -> its writable layer inside
	syncInside map[string]string // root -> its path inside, when not its host path
	guard      *policy.ConfigGuard
	uid, gid   int
	started    time.Time
}

// Exec starts a process through the guest's agent.
func (s *vmSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.Session.Exec(ctx, req)
	if err != nil {
		return nil, err
	}
	return &agentbox.Process{Process: p, S: s.Session}, nil
}

// Stats reads the VMM's host cgroup: memory and CPU include the guest
// kernel's and QEMU's own (the whole VM is what the host pays for).
func (s *vmSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.Closed() {
		return sandbox.Stats{}, s.ClosedErr("stats")
	}
	mem, peak, cpu := s.cg.stats()
	return sandbox.Stats{MemoryBytes: mem, MemoryPeakBytes: peak, CPUNanos: cpu}, nil
}

// teardown ends the sandbox (agentbox runs it once): the agent channel
// closed, the VMM killed (the guest holds nothing the host needs), the
// cgroup and the VM's directory (its sockets) removed.
func (s *vmSandbox) teardown(why string) error {
	_, peak, _ := s.cg.stats()
	s.Client.Close()
	s.vm.Kill()
	var errs []error
	if err := s.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove vm directory: %w", err))
	}
	s.Audit.Emit(audit.Event{Sandbox: s.ID(), Type: audit.TypeDestroy, Message: why,
		Fields: map[string]any{"memory_peak_bytes": peak}})
	return errors.Join(errs...)
}

func hostCPUs() int { return runtime.NumCPU() }
