package microvm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/ending"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// vmSandbox is one running VM: the VMM process, its cgroup, its directory
// and the agent client talking to the guest's init.
type vmSandbox struct {
	id       string
	b        *Backend
	log      *slog.Logger
	audit    audit.Sink
	vm       VM
	client   *agent.Client
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
	timer      atomic.Pointer[time.Timer]

	done     chan struct{}
	teardown sync.Once
	tdErr    error
	cause    ending.Cause // why it ended
}

func (s *vmSandbox) ID() string            { return s.id }
func (s *vmSandbox) Done() <-chan struct{} { return s.done }

func (s *vmSandbox) errClosed(op string) error { return s.cause.Err(s.id, op) }

// Exec starts a process through the guest's agent.
func (s *vmSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.cause.Exec(ctx, s.id, s.client.Exec, req)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, s: s}, nil
}

// Files is the agent's file API, inside the guest, as the sandbox's user.
func (s *vmSandbox) Files() sandbox.Files { return s.client.Files() }

// Stats reads the VMM's host cgroup: memory and CPU include the guest
// kernel's and QEMU's own (the whole VM is what the host pays for).
func (s *vmSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	if s.cause.Closed.Load() {
		return sandbox.Stats{}, s.errClosed("stats")
	}
	mem, peak, cpu := s.cg.stats()
	return sandbox.Stats{MemoryBytes: mem, MemoryPeakBytes: peak, CPUNanos: cpu}, nil
}

// Destroy ends the VM and removes every host resource. Idempotent.
func (s *vmSandbox) Destroy(ctx context.Context) error {
	s.end("destroyed")
	return s.tdErr
}

// watch ends the sandbox when the VMM exits on its own (the guest powered
// off or crashed) or the channel breaks.
func (s *vmSandbox) watch() {
	select {
	case <-s.vm.Done():
	case <-s.client.Done():
	}
	s.end("sandbox exited")
}

func (s *vmSandbox) timeout() {
	s.cause.TimedOut.Store(true)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.end("timeout")
}

// end tears the sandbox down once: the agent channel closed, the VMM
// killed (the guest holds nothing the host needs), the cgroup and the VM's
// directory (its sockets) removed.
func (s *vmSandbox) end(why string) {
	s.teardown.Do(func() {
		s.cause.Closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		_, peak, _ := s.cg.stats()
		s.client.Close()
		s.vm.Kill()
		var errs []error
		if err := s.cg.remove(); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove vm directory: %w", err))
		}
		if len(errs) > 0 {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, errors.Join(errs...))
		}
		s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDestroy, Message: why,
			Fields: map[string]any{"memory_peak_bytes": peak}})
		s.log.Debug("sandbox ended", "why", why)
		close(s.done)
	})
}

// process reports the sandbox's wall timeout on processes it ended.
type process struct {
	sandbox.Process
	s *vmSandbox
}

// Wait reports a process the sandbox's timeout killed as killed for that
// reason.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	return p.s.cause.Status(ctx, p.s.done, st, err)
}

func hostCPUs() int { return runtime.NumCPU() }

// DialPort opens a stream to port on the guest's loopback through the
// agent (the VM has no NIC). See sandbox.PortDialer.
func (s *vmSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.cause.Closed.Load() {
		return nil, s.errClosed("dial")
	}
	return s.client.Dial(ctx, port)
}
