package native

import (
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/fsguard"
)

// The kernel primitives below are what the OCI runtime (backend/native/oci)
// builds on: the same seccomp floor, Landlock application, capability
// drop and seccomp supervisor a native sandbox gets, so that one safety
// property keeps one implementation.

// SeccompFloor returns Airlock's seccomp floor as a classic BPF program:
// the calls no sandboxed process may make (mount, setns, new namespaces,
// ptrace, bpf, keyctl, module loading, ...), set-id modes refused, and,
// with mediate, every call that creates, renames, links or opens for
// writing routed to the write mediator (fsguard). notify selects
// SECCOMP_RET_USER_NOTIF for denied calls (a supervisor must then serve
// the listener), else they fail with EPERM.
func SeccompFloor(notify, mediate bool) ([]unix.SockFilter, error) {
	f, err := buildFilter(notify, mediate)
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(f.Prog))
	for i, in := range f.Prog {
		out[i] = unix.SockFilter{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return out, nil
}

// InstallSeccomp installs prog on every thread of the calling process
// (no_new_privs must be set); with listen it returns the user-notification
// listener, else -1.
func InstallSeccomp(prog []unix.SockFilter, listen bool) (int, error) {
	return installSockFilter(prog, listen)
}

// Landlock access rights for LandlockRule.
const (
	LandlockRead      = llRead
	LandlockReadExec  = llReadExec
	LandlockReadWrite = llReadWrite
	// LandlockMediated is what a host-backed writable mount grants
	// directly when writes go through the write mediator.
	LandlockMediated = llMediated
	// LandlockDevice is what device nodes (null, tty, ...) need.
	LandlockDevice = llDevRights
	// LandlockFileRights are the rights that apply to a non-directory
	// (a rule on a file may hold no others).
	LandlockFileRights = llFileRights
	// LandlockMakeDevice are the rights to create device nodes, which no
	// rule of the OCI runtime grants.
	LandlockMakeDevice = llMakeChar | llMakeBlock
)

// LandlockRule grants Access beneath Path (a path in the caller's view).
type LandlockRule struct {
	Access uint64
	Path   string
}

// RestrictPaths confines every thread of the calling process to rules
// with the best Landlock ABI the kernel has (missing paths are skipped).
func RestrictPaths(rules []LandlockRule) error {
	rs := make([]llRule, len(rules))
	for i, r := range rules {
		rs[i] = llRule{Access: r.Access, Path: r.Path}
	}
	return applyLandlock(rs)
}

// DropBoundingSet empties the capability bounding set of the calling
// thread except for keep (capability numbers).
func DropBoundingSet(keep map[int]bool) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return err
		}
	}
	return nil
}

// LoopbackUp brings lo up in the calling thread's network namespace.
func LoopbackUp() error { return loopbackUp() }

// Supervisor serves one seccomp listener from the host: the write
// mediator's calls go to it, every other notification is a denied call
// (answered EPERM and reported).
type Supervisor struct{ s *supervisor }

// StartSupervisor prepares a supervisor whose thread acts with creds (nil:
// no write mediation); report receives each denied call's name and pid.
// Serve must follow, then Stop once.
func StartSupervisor(creds *fsguard.Creds, report func(name string, pid uint32)) (*Supervisor, error) {
	s, err := startSupervisor(creds, report)
	if err != nil {
		return nil, err
	}
	return &Supervisor{s}, nil
}

// Serve hands the listener (and the mediator, which may be nil) to the
// supervisor, which owns both from now on.
func (s *Supervisor) Serve(listener int, med *fsguard.Mediator) error {
	return s.s.start(listener, med)
}

// Done is closed when every process the listener serves is gone.
func (s *Supervisor) Done() <-chan struct{} { return s.s.done }

// Stop ends the supervisor. Idempotent.
func (s *Supervisor) Stop() { s.s.stop() }
