package guest

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/agentsig"
)

// The guest kernel is the first wall: sandbox processes get a seccomp
// filter that refuses (EPERM) the kernel interfaces they have no use for
// and that carry most kernel exploits, so that escaping needs a bug in
// what remains of the guest kernel and then one in the VMM. Installed on
// the agent's spawn thread (with no_new_privs), every process it forks
// inherits it; the agent's other threads are not filtered.
var deniedSyscalls = []uintptr{
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_EXECVEAT, // fileless execution from a memfd
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT,
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_SYSLOG, unix.SYS_LOOKUP_DCOOKIE,
}

const x32SyscallBit = 0x40000000

// installSeccomp installs the filter on the calling thread (no TSYNC).
func installSeccomp() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("guest seccomp filter: only amd64 is supported, not %s", runtime.GOARCH)
	}
	const (
		offNr   = 0
		offArch = 4
		eperm   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.AUDIT_ARCH_X86_64, Jt: 1, Jf: 0},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offNr},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32SyscallBit, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: eperm},
	}
	for _, nr := range deniedSyscalls {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(nr), Jt: 0, Jf: 1},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: eperm})
	}
	prog = append(prog, signalChecks(eperm)...)
	prog = append(prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("install seccomp filter: %w", e)
	}
	return nil
}

// signalChecks refuses the ways to send the agent a fault signal that
// looks like a real fault, as the native backend's filter does:
// rt_sigqueueinfo and rt_tgsigqueueinfo to PID 1 (any si_code the
// caller likes), pidfd_send_signal with a siginfo, and fcntl(F_SETSIG)
// of a fault signal (I/O readiness would send it with a kernel si_code to
// the F_SETOWN owner). It runs with the syscall number loaded and either
// answers or falls through with it still loaded.
func signalChecks(eperm uint32) []unix.SockFilter {
	const (
		offArg0 = 16
		offArg1 = 24
		offArg2 = 32
	)
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	allow := unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}
	deny := unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: eperm}
	prog := []unix.SockFilter{
		jeq(unix.SYS_RT_SIGQUEUEINFO, 1, 0),
		jeq(unix.SYS_RT_TGSIGQUEUEINFO, 0, 4),
		ld(offArg0), jeq(1, 0, 1), deny, allow,
		jeq(unix.SYS_PIDFD_SEND_SIGNAL, 0, 6),
		ld(offArg2), jeq(0, 0, 3), ld(offArg2 + 4), jeq(0, 0, 1), allow, deny,
	}
	n := len(agentsig.Fault)
	prog = append(prog, jeq(unix.SYS_FCNTL, 0, uint8(5+n)), ld(offArg1), jeq(unix.F_SETSIG, 0, uint8(n+1)), ld(offArg2))
	for i, sig := range agentsig.Fault {
		prog = append(prog, jeq(sig, uint8(n-i), 0))
	}
	return append(prog, allow, deny)
}
