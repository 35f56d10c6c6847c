package native

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is a classic BPF program built here on the host and
// shipped to the init, which only installs it. Denied calls either go to
// the host's supervisor (SECCOMP_RET_USER_NOTIF: it answers EPERM and
// records a violation) or, without a listener, fail with EPERM directly.

// bpfInsn mirrors struct sock_filter; JSON-friendly for the init config.
type bpfInsn struct {
	Code uint16 `json:"c"`
	Jt   uint8  `json:"t"`
	Jf   uint8  `json:"f"`
	K    uint32 `json:"k"`
}

// Offsets into struct seccomp_data.
const (
	offNr      = 0
	offArch    = 4
	offArgLow0 = 16 // args[0], low 32 bits (little endian)
	offArgLow1 = 24 // args[1], low 32 bits
)

// cloneNewMask holds every CLONE_NEW* flag (also CLONE_NEWTIME, which shares
// its bit with CSIGNAL's range only for clone3, checked separately).
const cloneNewMask = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWTIME

// Ioctl requests denied to everyone (terminal input injection).
var deniedIoctls = map[uint32]string{
	unix.TIOCSTI:   "ioctl(TIOCSTI)",
	unix.TIOCLINUX: "ioctl(TIOCLINUX)",
}

// Socket address families denied: vsock reaches the hypervisor host (and
// other VMs) whatever the network namespace.
var deniedSocketFamilies = map[uint32]string{
	unix.AF_VSOCK: "socket(AF_VSOCK)",
}

// filterSpec is the compiled filter plus the names needed to report
// violations by syscall number.
type filterSpec struct {
	Prog []bpfInsn
}

// buildFilter compiles the deny-list filter. notify selects
// SECCOMP_RET_USER_NOTIF for denied calls (else RET_ERRNO|EPERM).
func buildFilter(notify bool) (filterSpec, error) {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return filterSpec{}, fmt.Errorf("seccomp: architecture %s not supported", runtime.GOARCH)
	}
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	if notify {
		deny = unix.SECCOMP_RET_USER_NOTIF
	}
	var a asm
	a.ld(offArch)
	a.jeq(arch, "nr", "")
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	a.label("nr")
	a.ld(offNr)
	if x32SyscallBit != 0 {
		a.jge(x32SyscallBit, "eperm", "")
	}
	for _, nr := range deniedSyscalls() {
		a.jeq(uint32(nr), "deny", "")
	}
	a.jeq(unix.SYS_CLONE, "checkflags", "")
	a.jeq(unix.SYS_UNSHARE, "checkflags", "")
	a.jeq(unix.SYS_IOCTL, "checkioctl", "")
	a.jeq(unix.SYS_SOCKET, "checksocket", "")
	// clone3 passes its flags in memory the filter cannot read: ENOSYS
	// makes libc fall back to clone, whose flags are checked.
	a.jeq(unix.SYS_CLONE3, "enosys", "")
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("checkflags")
	a.ld(offArgLow0)
	a.jset(cloneNewMask, "deny", "")
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("checkioctl")
	a.ld(offArgLow1)
	for req := range deniedIoctls {
		a.jeq(req, "deny", "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)

	// Socket families no network namespace confines.
	a.label("checksocket")
	a.ld(offArgLow0)
	for fam := range deniedSocketFamilies {
		a.jeq(fam, "deny", "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("deny")
	a.ret(deny)
	a.label("eperm")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.label("enosys")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	prog, err := a.assemble()
	if err != nil {
		return filterSpec{}, err
	}
	return filterSpec{Prog: prog}, nil
}

// syscallName names a denied syscall for violation events.
func syscallName(nr int32, args [6]uint64) string {
	if n, ok := deniedSyscallNames[int(nr)]; ok {
		return n
	}
	switch nr {
	case unix.SYS_CLONE:
		return "clone(CLONE_NEW*)"
	case unix.SYS_UNSHARE:
		return "unshare"
	case unix.SYS_IOCTL:
		if n, ok := deniedIoctls[uint32(args[1])]; ok {
			return n
		}
		return "ioctl"
	case unix.SYS_SOCKET:
		if n, ok := deniedSocketFamilies[uint32(args[0])]; ok {
			return n
		}
		return "socket"
	}
	return fmt.Sprintf("syscall %d", nr)
}

func deniedSyscalls() []int {
	out := make([]int, 0, len(deniedSyscallTable))
	for _, s := range deniedSyscallTable {
		out = append(out, s.nr)
	}
	return out
}

var deniedSyscallNames = func() map[int]string {
	m := make(map[int]string, len(deniedSyscallTable))
	for _, s := range deniedSyscallTable {
		m[s.nr] = s.name
	}
	return m
}()

// asm is a tiny assembler for classic BPF with symbolic forward jumps.
type asm struct {
	insns  []bpfInsn
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at     int
	jt, jf string
}

func (a *asm) ld(off uint32) {
	a.insns = append(a.insns, bpfInsn{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (a *asm) ret(v uint32) {
	a.insns = append(a.insns, bpfInsn{Code: unix.BPF_RET | unix.BPF_K, K: v})
}

func (a *asm) jmp(op uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, fixup{at: len(a.insns), jt: jt, jf: jf})
	a.insns = append(a.insns, bpfInsn{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *asm) jeq(k uint32, jt, jf string)  { a.jmp(unix.BPF_JEQ, k, jt, jf) }
func (a *asm) jge(k uint32, jt, jf string)  { a.jmp(unix.BPF_JGE, k, jt, jf) }
func (a *asm) jset(k uint32, jt, jf string) { a.jmp(unix.BPF_JSET, k, jt, jf) }

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.insns)
}

// assemble resolves labels ("" means the next instruction).
func (a *asm) assemble() ([]bpfInsn, error) {
	off := func(from int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: undefined label %q", name)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp: jump to %q out of range (%d)", name, d)
		}
		return uint8(d), nil
	}
	for _, f := range a.fixups {
		jt, err := off(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		jf, err := off(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		a.insns[f.at].Jt, a.insns[f.at].Jf = jt, jf
	}
	if len(a.insns) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program too long (%d)", len(a.insns))
	}
	return a.insns, nil
}

// installFilter installs prog on every thread of this process and, when
// listen is set, returns the user-notification listener fd.
func installFilter(prog []bpfInsn, listen bool) (int, error) {
	filters := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filters[i] = unix.SockFilter{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_TSYNC)
	if listen {
		flags |= unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	if !listen {
		return -1, nil
	}
	return int(r), nil
}
