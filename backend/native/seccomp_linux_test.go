package native

import (
	"encoding/binary"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompInput builds struct seccomp_data for the x/net/bpf VM, whose
// absolute loads are big endian: each 32-bit word is stored that way so the
// VM reads the value the kernel would.
func seccompInput(arch uint32, nr int, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[16+8*i+4:], uint32(a>>32))
	}
	return b
}

func runFilter(t *testing.T, prog []bpfInsn, in []byte) uint32 {
	t.Helper()
	insns := make([]bpf.Instruction, len(prog))
	for i, p := range prog {
		insns[i] = bpf.RawInstruction{Op: p.Code, Jt: p.Jt, Jf: p.Jf, K: p.K}.Disassemble()
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("filter does not load: %v", err)
	}
	out, err := vm.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(out)
}

func TestSeccompFilterDecisions(t *testing.T) {
	arch, ok := auditArch["amd64"]
	if !ok {
		testutil.Skip(t, "seccomp filter table exists for amd64 only")
	}
	notif, err := buildFilter(true)
	if err != nil {
		t.Fatal(err)
	}
	errno, err := buildFilter(false)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		deny   = unix.SECCOMP_RET_USER_NOTIF
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		kill   = unix.SECCOMP_RET_KILL_PROCESS
	)
	cases := []struct {
		name string
		in   []byte
		want uint32
	}{
		{"read", seccompInput(arch, unix.SYS_READ), allow},
		{"openat", seccompInput(arch, unix.SYS_OPENAT), allow},
		{"ptrace", seccompInput(arch, unix.SYS_PTRACE, unix.PTRACE_ATTACH, 1), deny},
		{"bpf", seccompInput(arch, unix.SYS_BPF), deny},
		{"mount", seccompInput(arch, unix.SYS_MOUNT), deny},
		{"fsopen", seccompInput(arch, unix.SYS_FSOPEN), deny},
		{"setns", seccompInput(arch, unix.SYS_SETNS), deny},
		{"io_uring_setup", seccompInput(arch, unix.SYS_IO_URING_SETUP), deny},
		{"kexec_load", seccompInput(arch, unix.SYS_KEXEC_LOAD), deny},
		{"clone thread", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		{"clone fork", seccompInput(arch, unix.SYS_CLONE, uint64(unix.SIGCHLD)), allow},
		{"clone newuser", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), deny},
		{"clone newns", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_NEWNS), deny},
		{"clone newtime", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_NEWTIME), deny},
		{"unshare files", seccompInput(arch, unix.SYS_UNSHARE, unix.CLONE_FILES), allow},
		{"unshare newuser", seccompInput(arch, unix.SYS_UNSHARE, unix.CLONE_NEWUSER), deny},
		{"unshare newnet", seccompInput(arch, unix.SYS_UNSHARE, unix.CLONE_NEWNET), deny},
		{"clone3", seccompInput(arch, unix.SYS_CLONE3), enosys},
		{"ioctl TIOCSTI", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TIOCSTI), deny},
		{"ioctl TIOCSTI high bits", seccompInput(arch, unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI), deny},
		{"ioctl TIOCLINUX", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TIOCLINUX), deny},
		{"ioctl TCGETS", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TCGETS), allow},
		{"socket inet", seccompInput(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM), allow},
		{"socket unix", seccompInput(arch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM), allow},
		{"socket vsock", seccompInput(arch, unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM), deny},
		{"x32 read", seccompInput(arch, 0x40000000|unix.SYS_READ), eperm},
		{"i386 arch", seccompInput(unix.AUDIT_ARCH_I386, unix.SYS_READ), kill},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := runFilter(t, notif.Prog, c.in); got != c.want {
				t.Errorf("notify filter: got %#x, want %#x", got, c.want)
			}
			want := c.want
			if want == deny {
				want = eperm
			}
			if got := runFilter(t, errno.Prog, c.in); got != want {
				t.Errorf("errno filter: got %#x, want %#x", got, want)
			}
		})
	}
}

func TestSyscallName(t *testing.T) {
	for _, c := range []struct {
		nr   int32
		args [6]uint64
		want string
	}{
		{unix.SYS_PTRACE, [6]uint64{}, "ptrace"},
		{unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSTI}, "ioctl(TIOCSTI)"},
		{unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWUSER}, "clone(CLONE_NEW*)"},
		{9999, [6]uint64{}, "syscall 9999"},
	} {
		if got := syscallName(c.nr, c.args); got != c.want {
			t.Errorf("syscallName(%d) = %q, want %q", c.nr, got, c.want)
		}
	}
}

func TestAssemblerRejectsBadJumps(t *testing.T) {
	var a asm
	a.jeq(1, "nowhere", "")
	if _, err := a.assemble(); err == nil {
		t.Fatal("undefined label accepted")
	}
	var b asm
	b.jeq(1, "far", "")
	for i := 0; i < 300; i++ {
		b.ret(0)
	}
	b.label("far")
	b.ret(0)
	if _, err := b.assemble(); err == nil {
		t.Fatal("out-of-range jump accepted")
	}
}
