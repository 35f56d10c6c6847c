package agent

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// sysClone3 is clone3's number on every architecture Linux has it.
const sysClone3 = 435

// refuseClone3 installs a seccomp filter on every thread of the agent,
// inherited by every process it starts, making clone3 fail with ENOSYS
// (GuestConfig.NoClone3): libc then falls back to clone, whose flags the
// runtime's own profile can check. Everything else is allowed (the
// runtime's profile decides). no_new_privs must be set already (the
// runtime sets it); a failure is an error, never a silent skip.
func refuseClone3() error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: sysClone3},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("refuse clone3 (seccomp filter): %v: %w", e, sandbox.ErrUnavailable)
	}
	return nil
}
