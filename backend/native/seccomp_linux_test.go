package native

import (
	"encoding/binary"
	"slices"
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
	notif, err := buildFilter(true, false)
	if err != nil {
		t.Fatal(err)
	}
	errno, err := buildFilter(false, false)
	if err != nil {
		t.Fatal(err)
	}
	mediated, err := buildFilter(true, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildFilter(false, true); err == nil {
		t.Error("mediation without notification accepted")
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
			if got := runFilter(t, mediated.Prog, c.in); got != c.want {
				t.Errorf("mediated filter: got %#x, want %#x", got, c.want)
			}
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

// TestSeccompFileCalls: with mediation every call that may create or
// write a file (and chmods setting execute or set-id bits) goes to the
// host; without it only set-id modes are refused, and openat2 (mode in
// memory) answers ENOSYS.
func TestSeccompFileCalls(t *testing.T) {
	arch, ok := auditArch["amd64"]
	if !ok {
		testutil.Skip(t, "seccomp filter table exists for amd64 only")
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		notify = unix.SECCOMP_RET_USER_NOTIF
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	filters := map[string]filterSpec{}
	for name, f := range map[string][2]bool{"mediated": {true, true}, "notify": {true, false}, "errno": {false, false}} {
		prog, err := buildFilter(f[0], f[1])
		if err != nil {
			t.Fatal(err)
		}
		filters[name] = prog
	}
	wr, cr, rd := uint64(unix.O_WRONLY), uint64(unix.O_CREAT|unix.O_WRONLY), uint64(unix.O_RDONLY)
	for _, c := range []struct {
		name                    string
		in                      []byte
		mediated, notify, errno uint32
	}{
		{"openat read", seccompInput(arch, unix.SYS_OPENAT, 0, 0, rd, 0), allow, allow, allow},
		{"openat write", seccompInput(arch, unix.SYS_OPENAT, 0, 0, wr, 0), notify, allow, allow},
		{"openat create 0644", seccompInput(arch, unix.SYS_OPENAT, 0, 0, cr, 0o644), notify, allow, allow},
		{"openat create 4755", seccompInput(arch, unix.SYS_OPENAT, 0, 0, cr, 0o4755), notify, notify, eperm},
		{"openat read 4755", seccompInput(arch, unix.SYS_OPENAT, 0, 0, rd, 0o4755), allow, allow, allow},
		{"openat tmpfile 2755", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_TMPFILE|unix.O_WRONLY, 0o2755), notify, notify, eperm},
		{"open truncate", seccompInput(arch, unix.SYS_OPEN, 0, unix.O_TRUNC, 0), notify, allow, allow},
		{"open create 2755", seccompInput(arch, unix.SYS_OPEN, 0, cr, 0o2755), notify, notify, eperm},
		{"creat 0644", seccompInput(arch, unix.SYS_CREAT, 0, 0o644), notify, allow, allow},
		{"creat 4755", seccompInput(arch, unix.SYS_CREAT, 0, 0o4755), notify, notify, eperm},
		{"mkdir 0755", seccompInput(arch, unix.SYS_MKDIR, 0, 0o755), notify, allow, allow},
		{"mkdir 2755", seccompInput(arch, unix.SYS_MKDIR, 0, 0o2755), notify, notify, eperm},
		{"mkdirat 2755", seccompInput(arch, unix.SYS_MKDIRAT, 0, 0, 0o2755), notify, notify, eperm},
		{"mknodat fifo", seccompInput(arch, unix.SYS_MKNODAT, 0, 0, unix.S_IFIFO|0o644), notify, allow, allow},
		{"chmod 0644", seccompInput(arch, unix.SYS_CHMOD, 0, 0o644), allow, allow, allow},
		{"chmod 0755", seccompInput(arch, unix.SYS_CHMOD, 0, 0o755), notify, allow, allow},
		{"chmod 4755", seccompInput(arch, unix.SYS_CHMOD, 0, 0o4755), notify, notify, eperm},
		{"fchmod 2644", seccompInput(arch, unix.SYS_FCHMOD, 3, 0o2644), notify, notify, eperm},
		{"fchmodat 0700", seccompInput(arch, unix.SYS_FCHMODAT, 0, 0, 0o700), notify, allow, allow},
		{"fchmodat2 6755", seccompInput(arch, unix.SYS_FCHMODAT2, 0, 0, 0o6755, 0), notify, notify, eperm},
		{"openat2", seccompInput(arch, unix.SYS_OPENAT2), notify, enosys, enosys},
		{"renameat2", seccompInput(arch, unix.SYS_RENAMEAT2), notify, allow, allow},
		{"linkat", seccompInput(arch, unix.SYS_LINKAT), notify, allow, allow},
		{"symlink", seccompInput(arch, unix.SYS_SYMLINK), notify, allow, allow},
		{"truncate", seccompInput(arch, unix.SYS_TRUNCATE), notify, allow, allow},
		{"unlinkat", seccompInput(arch, unix.SYS_UNLINKAT), allow, allow, allow},
		{"ftruncate", seccompInput(arch, unix.SYS_FTRUNCATE), allow, allow, allow},
	} {
		for name, want := range map[string]uint32{"mediated": c.mediated, "notify": c.notify, "errno": c.errno} {
			if got := runFilter(t, filters[name].Prog, c.in); got != want {
				t.Errorf("%s, %s filter: got %#x, want %#x", c.name, name, got, want)
			}
		}
	}
}

// The filter is the same program every time (it was emitted in map order).
func TestSeccompFilterDeterministic(t *testing.T) {
	if _, ok := auditArch["amd64"]; !ok {
		testutil.Skip(t, "seccomp filter table exists for amd64 only")
	}
	first, _ := buildFilter(true, true)
	for i := 0; i < 20; i++ {
		again, _ := buildFilter(true, true)
		if !slices.Equal(first.Prog, again.Prog) {
			t.Fatal("two builds of the filter differ")
		}
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
