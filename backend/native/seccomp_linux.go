package native

import (
	"fmt"
	"runtime"
	"slices"
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
	offArgLow2 = 32
	offArgLow3 = 40
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

// Flags and modes the filter looks at.
const (
	// writeIntent: an open that may write or create (O_TMPFILE shares
	// O_DIRECTORY's bit, so its own bit is tested).
	writeIntent = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | (unix.O_TMPFILE &^ unix.O_DIRECTORY)
	setIDBits   = unix.S_ISUID | unix.S_ISGID
	execBits    = 0o111
)

// buildFilter compiles the deny-list filter. notify selects
// SECCOMP_RET_USER_NOTIF for denied calls (else RET_ERRNO|EPERM). mediate
// routes the calls that create, rename, link or open for writing (and
// chmods that set execute or set-id bits) to the host's write mediator
// (fsguard), which needs notify; without it set-id modes are refused here
// and openat2, whose mode the filter cannot read, answers ENOSYS.
func buildFilter(notify, mediate bool) (filterSpec, error) {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return filterSpec{}, fmt.Errorf("seccomp: architecture %s not supported", runtime.GOARCH)
	}
	if mediate && !notify {
		return filterSpec{}, fmt.Errorf("seccomp: write mediation needs user notification")
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
	signalDispatch(&a)
	// clone3 passes its flags in memory the filter cannot read: ENOSYS
	// makes libc fall back to clone, whose flags are checked.
	a.jeq(unix.SYS_CLONE3, "enosys", "")
	fileDispatch(&a, mediate)
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("checkflags")
	a.ld(offArgLow0)
	a.jset(cloneNewMask, "deny", "")
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("checkioctl")
	a.ld(offArgLow1)
	for _, req := range sortedKeys(deniedIoctls) {
		a.jeq(req, "deny", "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)

	// Socket families no network namespace confines.
	a.label("checksocket")
	a.ld(offArgLow0)
	for _, fam := range sortedKeys(deniedSocketFamilies) {
		a.jeq(fam, "deny", "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)

	fileChecks(&a, mediate)
	signalChecks(&a)

	a.label("allow")
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("deny")
	a.ret(deny)
	a.label("setid")
	a.ret(deny)
	if mediate {
		a.label("mediate")
		a.ret(unix.SECCOMP_RET_USER_NOTIF)
	}
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

// fileDispatch jumps the file calls to their checks: which argument holds
// the flags or mode (fileChecks); with mediation, the calls that create,
// rename or link go to the mediator whatever their arguments.
func fileDispatch(a *asm, mediate bool) {
	a.jeq(unix.SYS_OPEN, "open1", "")
	a.jeq(unix.SYS_OPENAT, "open2", "")
	a.jeq(unix.SYS_CREAT, "mode1", "")
	a.jeq(unix.SYS_MKDIR, "mode1", "")
	a.jeq(unix.SYS_MKNOD, "mode1", "")
	a.jeq(unix.SYS_MKDIRAT, "mode2", "")
	a.jeq(unix.SYS_MKNODAT, "mode2", "")
	a.jeq(unix.SYS_CHMOD, "chmod1", "")
	a.jeq(unix.SYS_FCHMOD, "chmod1", "")
	a.jeq(unix.SYS_FCHMODAT, "chmod2", "")
	a.jeq(unix.SYS_FCHMODAT2, "chmod2", "")
	if mediate {
		for _, nr := range []uint32{unix.SYS_OPENAT2, unix.SYS_SYMLINK, unix.SYS_SYMLINKAT, unix.SYS_LINK,
			unix.SYS_LINKAT, unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2, unix.SYS_TRUNCATE} {
			a.jeq(nr, "mediate", "")
		}
	} else {
		a.jeq(unix.SYS_OPENAT2, "enosys", "")
	}
}

// fileChecks are the argument checks fileDispatch jumps to.
func fileChecks(a *asm, mediate bool) {
	// open(path, flags, mode) and openat(dirfd, path, flags, mode): with
	// mediation every open that may write goes to the mediator (which
	// also refuses set-id modes); without, only set-id creation is refused.
	for _, o := range []struct {
		label       string
		flags, mode uint32
	}{{"open1", offArgLow1, offArgLow2}, {"open2", offArgLow2, offArgLow3}} {
		a.label(o.label)
		a.ld(o.flags)
		if mediate {
			a.jset(writeIntent, "mediate", "")
			a.ret(unix.SECCOMP_RET_ALLOW)
			continue
		}
		a.jset(unix.O_CREAT|(unix.O_TMPFILE&^unix.O_DIRECTORY), "", "allow")
		a.ld(o.mode)
		a.jset(setIDBits, "setid", "")
		a.ret(unix.SECCOMP_RET_ALLOW)
	}
	// creat, mkdir, mknod (mode in arg 1), mkdirat, mknodat (arg 2).
	for _, m := range []struct {
		label string
		off   uint32
	}{{"mode1", offArgLow1}, {"mode2", offArgLow2}} {
		a.label(m.label)
		if mediate {
			a.ja("mediate")
			continue
		}
		a.ld(m.off)
		a.jset(setIDBits, "setid", "")
		a.ret(unix.SECCOMP_RET_ALLOW)
	}
	// chmod family: set-id bits are refused; execute bits (which turn a
	// planted file into a git hook) go to the mediator.
	for _, m := range []struct {
		label string
		off   uint32
	}{{"chmod1", offArgLow1}, {"chmod2", offArgLow2}} {
		a.label(m.label)
		a.ld(m.off)
		if mediate {
			a.jset(setIDBits|execBits, "mediate", "")
		} else {
			a.jset(setIDBits, "setid", "")
		}
		a.ret(unix.SECCOMP_RET_ALLOW)
	}

}

func sortedKeys(m map[uint32]string) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// syscallName names a denied syscall for violation events.
func syscallName(nr int32, args [6]uint64) string {
	if n, ok := deniedSyscallNames[int(nr)]; ok {
		return n
	}
	if n, ok := signalCallName(nr); ok {
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
	ja     string // BPF_JA target (K holds the offset)
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

func (a *asm) jeq(k uint32, jt, jf string) { a.jmp(unix.BPF_JEQ, k, jt, jf) }

// ja jumps unconditionally (a jeq that is always true on the loaded word
// would need a known value; BPF_JA takes a 32-bit offset).
func (a *asm) ja(to string) {
	a.fixups = append(a.fixups, fixup{at: len(a.insns), ja: to})
	a.insns = append(a.insns, bpfInsn{Code: unix.BPF_JMP | unix.BPF_JA})
}
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
		if f.ja != "" {
			to, ok := a.labels[f.ja]
			if !ok || to <= f.at {
				return nil, fmt.Errorf("seccomp: bad jump to %q", f.ja)
			}
			a.insns[f.at].K = uint32(to - f.at - 1)
			continue
		}
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
	return installSockFilter(filters, listen)
}

// installSockFilter is installFilter for a program already in the
// kernel's layout.
func installSockFilter(filters []unix.SockFilter, listen bool) (int, error) {
	if len(filters) == 0 {
		return -1, fmt.Errorf("seccomp: empty program")
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
