package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/fsguard"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/sandbox"
)

// nativeSandbox is one running native sandbox: the init process (pid 1 of
// its namespaces), its cgroup, the seccomp supervisor and the agent client.
type nativeSandbox struct {
	id     string
	b      *Backend
	log    *slog.Logger
	audit  audit.Sink
	cmd    *exec.Cmd
	cg     *sandboxCgroup
	sup    *supervisor
	client *agent.Client
	lock   *os.File      // the state lock, held while the sandbox lives
	lease  *idmap.Lease  // the host id range, held while the sandbox lives (nil: ids 1:1)
	host   fsguard.Creds // host uid/gid of the sandbox's processes
	// writable is an image sandbox's writable layer, removed at the end.
	writable *imageroot.Writable
	denials  *denials
	stderr   *boundedBuffer
	timer    atomic.Pointer[time.Timer] // the wall timeout (set after start, read by end)

	waited   <-chan struct{} // closed when the init has been reaped
	done     chan struct{}   // closed when the sandbox has ended
	teardown sync.Once
	tdErr    error
	timedOut atomic.Bool
	closed   atomic.Bool
	execs    atomic.Int64 // Exec calls so far
	lastStat cgroupStats  // stats captured just before the cgroup went away
	statMu   sync.Mutex
}

func (s *nativeSandbox) ID() string { return s.id }

// HostIDs returns the host uid and gid the sandbox's processes run as.
func (s *nativeSandbox) HostIDs() (uid, gid int) { return s.host.UID, s.host.GID }

func (s *nativeSandbox) Done() <-chan struct{} { return s.done }

func (s *nativeSandbox) errClosed(op string) error {
	if s.timedOut.Load() {
		return fmt.Errorf("sandbox %q: %s: timed out: %w", s.id, op, errors.Join(sandbox.ErrClosed, sandbox.ErrTimeout))
	}
	return fmt.Errorf("sandbox %q: %s: %w", s.id, op, sandbox.ErrClosed)
}

// Exec starts a process through the agent.
func (s *nativeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.closed.Load() || s.client == nil {
		return nil, s.errClosed("exec")
	}
	// The OOM-kill count before the process starts tells whether a SIGKILL
	// it dies of was the memory limit's. Before the first exec it is 0
	// without asking the cgroup: the init is the only process until then,
	// and an OOM kill of it ends the sandbox.
	var oom int64
	if s.execs.Add(1) > 1 {
		oom = s.cg.oomKills()
	}
	p, err := s.client.Exec(ctx, req)
	if err != nil {
		if s.closed.Load() {
			return nil, s.errClosed("exec")
		}
		return nil, err
	}
	return &process{Process: p, s: s, oomBefore: oom, args: req.Args}, nil
}

// Files gives the agent's file API (confined by the same Landlock domain
// and mounts as the sandbox's processes).
func (s *nativeSandbox) Files() sandbox.Files {
	if s.client == nil {
		return closedFiles{s}
	}
	return s.client.Files()
}

// Stats reads the cgroup and the violation count. After the sandbox ended
// it returns the figures captured at the end with an ErrClosed error.
func (s *nativeSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	closed := s.closed.Load()
	var cs cgroupStats
	if closed {
		s.statMu.Lock()
		cs = s.lastStat
		s.statMu.Unlock()
	} else {
		cs = s.cg.stats()
	}
	st := sandbox.Stats{
		MemoryBytes: cs.MemoryBytes, MemoryPeakBytes: cs.MemoryPeak,
		Pids: cs.Pids, CPUNanos: cs.CPUNanos,
	}
	if s.sup != nil {
		st.Violations = int(s.sup.count.Load())
	}
	if s.denials != nil {
		n, _ := s.denials.count()
		st.Violations += n
	}
	if closed {
		return st, s.errClosed("stats")
	}
	return st, nil
}

// Destroy ends every process and removes every host resource. Idempotent.
func (s *nativeSandbox) Destroy(ctx context.Context) error {
	s.end("destroyed")
	return s.tdErr
}

// watch ends the sandbox when the init exits on its own.
func (s *nativeSandbox) watch() {
	<-s.waited
	if !s.closed.Load() {
		s.log.Warn("sandbox init exited", "state", s.cmd.ProcessState.String(), "stderr", s.stderr.String())
	}
	s.end("init exited")
}

func (s *nativeSandbox) timeout() {
	s.timedOut.Store(true)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeLimit, Message: "sandbox wall timeout",
		Fields: map[string]any{"limit": "timeout"}})
	s.end("timeout")
}

func (s *nativeSandbox) violation(name string, pid uint32) {
	s.log.Info("denied syscall", "syscall", name, "host_pid", pid)
	s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeViolation, Message: "denied syscall " + name,
		Fields: map[string]any{"syscall": name, "host_pid": pid}})
}

// end tears the sandbox down once: kill the init (the pid namespace dies
// with it) and everything in the cgroup, reap, remove the cgroup and the
// state lock.
func (s *nativeSandbox) end(why string) {
	s.teardown.Do(func() {
		s.closed.Store(true)
		if t := s.timer.Load(); t != nil {
			t.Stop()
		}
		t0 := time.Now()
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		s.cg.kill()
		// The final figures are read while the kernel tears the processes
		// down (peak memory, OOM kills and CPU time stay; current memory
		// and pids are the teardown's).
		cs := s.cg.stats()
		s.statMu.Lock()
		s.lastStat = cs
		s.statMu.Unlock()
		<-s.waited
		tReaped := time.Now()
		var errs []error
		if s.client != nil {
			s.client.Close()
		}
		if s.sup != nil {
			s.sup.stop()
		}
		if err := s.cg.remove(); err != nil {
			errs = append(errs, err)
		}
		tCgroup := time.Now()
		// The overlay went with the init's mount namespace.
		if err := s.writable.Remove(); err != nil {
			errs = append(errs, err)
		}
		s.b.unlockState(s.id, s.lock)
		s.lease.Release()
		s.log.Debug("sandbox ended", "why", why, "reap", tReaped.Sub(t0), "cgroup", tCgroup.Sub(tReaped), "files", time.Since(tCgroup))
		if len(errs) > 0 {
			s.tdErr = fmt.Errorf("destroy sandbox %q: %w", s.id, errors.Join(errs...))
		}
		fields := map[string]any{"memory_peak_bytes": cs.MemoryPeak, "oom_kills": cs.OOMKills}
		if n, more := s.denials.count(); n > 0 {
			fields["denied"], fields["denied_unreported"] = n, more
		}
		s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDestroy, Message: why, Fields: fields})
		close(s.done)
	})
}

// process annotates the agent's exit status with what only the host knows:
// the memory limit (OOM kill in the cgroup) and the sandbox wall timeout.
type process struct {
	sandbox.Process
	s         *nativeSandbox
	oomBefore int64
	args      []string
}

func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	st, err := p.Process.Wait(ctx)
	if err != nil {
		if p.s.timedOut.Load() {
			return sandbox.ExitStatus{Code: 128 + sandbox.SIGKILL, Signal: sandbox.SIGKILL, TimedOut: true}, nil
		}
		return st, err
	}
	if st.Signal == sandbox.SIGKILL {
		var oom int64
		if p.s.closed.Load() {
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
		if p.s.timedOut.Load() {
			st.TimedOut = true
		}
	}
	return st, nil
}

// closedFiles is the Files of a sandbox without an agent (test mode).
type closedFiles struct{ s *nativeSandbox }

func (c closedFiles) ReadFile(context.Context, string) (io.ReadCloser, error) {
	return nil, c.s.errClosed("read file")
}
func (c closedFiles) WriteFile(context.Context, string, io.Reader, fs.FileMode, bool) error {
	return c.s.errClosed("write file")
}
func (c closedFiles) Stat(context.Context, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, c.s.errClosed("stat")
}
func (c closedFiles) List(context.Context, string) ([]sandbox.FileInfo, error) {
	return nil, c.s.errClosed("list")
}
func (c closedFiles) Mkdir(context.Context, string, fs.FileMode, bool) error {
	return c.s.errClosed("mkdir")
}
func (c closedFiles) Remove(context.Context, string, bool) error { return c.s.errClosed("remove") }
func (c closedFiles) Rename(context.Context, string, string) error {
	return c.s.errClosed("rename")
}

// DialPort opens a stream to port on the sandbox's loopback (its own
// network namespace) through the agent. See sandbox.PortDialer.
func (s *nativeSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if s.closed.Load() || s.client == nil {
		return nil, s.errClosed("dial")
	}
	return s.client.Dial(ctx, port)
}
