package main

// Kernel-surface attacks: each tries to reach a kernel interface a sandbox
// must not expose. "Escaped" means the call got past every permission check
// (it returned a descriptor, or failed only on the garbage we gave it).

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/mountinfo"
)

func init() {
	register("tiocsti", attackTIOCSTI)
	register("tioclinux", attackTIOCLINUX)
	register("bpf", attackBPF)
	register("perf", attackPerf)
	register("userfaultfd", attackUserfaultfd)
	register("keyctl", attackKeyctl)
	register("module-load", attackModuleLoad)
	register("memfd-exec", attackMemfdExec)
	register("memfd-payload", func(params) { escaped("code ran from an anonymous memfd via execveat") })
	register("setuid", attackSetuid)
	register("setuid-payload", setuidPayload)
	register("caps", attackCaps)
	register("mknod-disk", attackMknodDisk)
	register("sysctl-write", attackSysctlWrite)
	register("cgroup-escape", attackCgroupEscape)
	register("open-by-handle", attackOpenByHandle)
	register("replace-binary", attackReplaceBinary)
	register("forkbomb", attackForkBomb)
}

func attackTIOCSTI(params) {
	var errs []string
	try := func(name string, fd int) {
		c := byte('#')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		if e == 0 {
			escaped("TIOCSTI pushed input into the terminal on %s", name)
		}
		errs = append(errs, name+": "+e.Error())
	}
	for fd := 0; fd <= 2; fd++ {
		try("fd "+strconv.Itoa(fd), fd)
	}
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		try("/dev/tty", fd)
	} else {
		errs = append(errs, "/dev/tty: "+err.Error())
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackTIOCLINUX(params) {
	var errs []string
	for _, dev := range []string{"/dev/tty0", "/dev/tty1", "/dev/console"} {
		fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_NOCTTY, 0)
		if err != nil {
			errs = append(errs, dev+": "+err.Error())
			continue
		}
		sub := [1]byte{12} // TIOCL_GETFGCONSOLE: harmless, but needs the VT
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub[0])))
		unix.Close(fd)
		if e == 0 {
			escaped("TIOCLINUX on %s answered (foreground console %d)", dev, r)
		}
		errs = append(errs, dev+" TIOCLINUX: "+e.Error())
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackBPF(params) {
	// BPF_MAP_CREATE of a 1-entry array map.
	attr := make([]byte, 128)
	binary.LittleEndian.PutUint32(attr[0:], unix.BPF_MAP_TYPE_ARRAY)
	binary.LittleEndian.PutUint32(attr[4:], 4)
	binary.LittleEndian.PutUint32(attr[8:], 8)
	binary.LittleEndian.PutUint32(attr[12:], 1)
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
	if e != 0 {
		blocked("bpf(BPF_MAP_CREATE): %v", e)
	}
	unix.Close(int(fd))
	escaped("bpf(BPF_MAP_CREATE) returned fd %d", fd)
}

func attackPerf(params) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		blocked("perf_event_open: %v", err)
	}
	unix.Close(fd)
	escaped("perf_event_open returned fd %d", fd)
}

func attackUserfaultfd(params) {
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
	if e == 0 {
		unix.Close(int(fd))
		escaped("userfaultfd() returned fd %d", fd)
	}
	if f, err := os.OpenFile("/dev/userfaultfd", os.O_RDWR, 0); err == nil {
		f.Close()
		escaped("opened /dev/userfaultfd (syscall: %v)", e)
	} else {
		blocked("userfaultfd: %v; /dev/userfaultfd: %v", e, err)
	}
}

func attackKeyctl(params) {
	id, err := unix.AddKey("user", "airlock-escape", []byte("payload"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		blocked("add_key: %v", err)
	}
	escaped("add_key created key %d in the kernel keyring", id)
}

func attackModuleLoad(p params) {
	fd, err := unix.MemfdCreate("module", 0)
	if err != nil {
		fail("memfd_create: %v", err)
	}
	_, _ = unix.Write(fd, []byte("\x7fELF-this-is-not-a-module"))
	err = unix.FinitModule(fd, "", 0)
	switch {
	case err == nil:
		escaped("finit_module accepted a module")
	case errors.Is(err, unix.ENOSYS) && p["unconfined"] == "1":
		notApplicable("this kernel has no module loader (finit_module: %v)", err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOSYS):
		blocked("finit_module: %v", err)
	default:
		escaped("finit_module passed the permission check and parsed our garbage: %v", err)
	}
}

func attackMemfdExec(params) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fail("read own binary: %v", err)
	}
	fd, err := unix.MemfdCreate("payload", 0)
	if err != nil {
		blocked("memfd_create: %v", err)
	}
	if _, err := unix.Write(fd, self); err != nil {
		blocked("write memfd: %v", err)
	}
	argv := []string{"attacks", "memfd-payload"}
	err = execveat(fd, argv)
	blocked("execveat(memfd): %v", err)
}

func execveat(fd int, argv []string) error {
	empty, _ := unix.BytePtrFromString("")
	av, _ := syscall.SlicePtrFromStrings(argv)
	ev, _ := syscall.SlicePtrFromStrings(os.Environ())
	_, _, e := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&av[0])), uintptr(unsafe.Pointer(&ev[0])), unix.AT_EMPTY_PATH, 0)
	return e
}

// attackSetuid runs a set-user-ID copy of this binary (planted by the
// runner, owned by another user) and reports whether the exec changed the
// effective user.
func attackSetuid(p params) {
	exe := p.get("exe")
	fi, err := os.Stat(exe)
	if err != nil {
		blocked("stat %s: %v", exe, err)
	}
	note("%s mode %v", exe, fi.Mode())
	err = syscall.Exec(exe, []string{exe, "setuid-payload"}, os.Environ())
	blocked("exec %s: %v", exe, err)
}

func setuidPayload(params) {
	r, e := unix.Getuid(), unix.Geteuid()
	if r != e {
		escaped("set-user-ID took effect: ruid %d euid %d", r, e)
	}
	nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	blocked("set-user-ID ignored: ruid %d euid %d (no_new_privs=%d)", r, e, nnp)
}

// attackCaps reports any effective capability: each one opens kernel
// surface (mounts, raw sockets, ptrace) even inside a user namespace.
func attackCaps(p params) {
	var allowed uint64
	if a := p["allowed"]; a != "" {
		n, err := strconv.ParseUint(a, 16, 64)
		if err != nil {
			fail("allowed %q: %v", a, err)
		}
		allowed = n
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fail("read status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v = strings.TrimSpace(v)
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				fail("parse CapEff %q: %v", v, err)
			}
			if n&^allowed != 0 {
				escaped("effective capabilities %s (%s)", v, capNames(n&^allowed))
			}
			if allowed != 0 {
				blocked("only the sandbox root's own set (CapEff %s, allowed %x)", v, allowed)
			}
			blocked("no effective capabilities (CapEff %s)", v)
		}
	}
	fail("no CapEff line")
}

func capNames(n uint64) string {
	names := map[int]string{0: "CHOWN", 1: "DAC_OVERRIDE", 2: "DAC_READ_SEARCH", 5: "KILL", 7: "SETUID",
		12: "NET_ADMIN", 13: "NET_RAW", 16: "SYS_MODULE", 17: "SYS_RAWIO", 19: "SYS_PTRACE", 21: "SYS_ADMIN", 27: "MKNOD"}
	var out []string
	for bit := 0; bit < 64; bit++ {
		if n&(1<<bit) != 0 {
			if s, ok := names[bit]; ok {
				out = append(out, s)
			}
		}
	}
	return strings.Join(out, ",") + ",..."
}

// attackMknodDisk creates device nodes for the host's kernel log and for
// the disk holding dir, and reads through them.
func attackMknodDisk(p params) {
	dir := p.get("dir")
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		fail("stat %s: %v", dir, err)
	}
	var errs []string
	for _, d := range []struct {
		name string
		mode uint32
		dev  uint64
	}{
		{"kmsg", unix.S_IFCHR, unix.Mkdev(1, 11)},
		{"disk", unix.S_IFBLK, st.Dev},
	} {
		node := filepath.Join(dir, "airlock-node-"+d.name)
		_ = os.Remove(node)
		if err := unix.Mknod(node, d.mode|0o600, int(d.dev)); err != nil {
			errs = append(errs, fmt.Sprintf("mknod %s %d:%d: %v", d.name, unix.Major(d.dev), unix.Minor(d.dev), err))
			continue
		}
		fd, err := unix.Open(node, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		os.Remove(node)
		if err != nil {
			errs = append(errs, fmt.Sprintf("mknod %s worked but open refused: %v", d.name, err))
			continue
		}
		buf := make([]byte, 8192)
		n, err := unix.Read(fd, buf)
		unix.Close(fd)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Sprintf("open %s worked but read refused: %v", d.name, err))
			continue
		}
		escaped("read %d bytes of the host through a %s device node: %s", n, d.name, short(buf[:n]))
	}
	blocked("%s", strings.Join(errs, "; "))
}

// attackSysctlWrite writes a host-global sysctl back with its own value.
func attackSysctlWrite(params) {
	const path = "/proc/sys/vm/swappiness"
	cur, err := os.ReadFile(path)
	if err != nil {
		blocked("read %s: %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		blocked("open %s for writing: %v", path, err)
	}
	_, err = f.Write(cur)
	f.Close()
	if err != nil {
		blocked("write %s: %v", path, err)
	}
	escaped("wrote host-global %s (%s)", path, strings.TrimSpace(string(cur)))
}

// attackCgroupEscape moves itself to the root of the cgroup2 hierarchy.
func attackCgroupEscape(params) {
	mounts, _ := mountinfo.Self()
	var roots []string
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			roots = append(roots, m.Point)
		}
	}
	if len(roots) == 0 {
		blocked("no cgroup2 hierarchy visible")
	}
	cg, _ := os.ReadFile("/proc/self/cgroup")
	var errs []string
	for _, r := range roots {
		err := os.WriteFile(filepath.Join(r, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		if err == nil {
			now, _ := os.ReadFile("/proc/self/cgroup")
			escaped("moved into %s/cgroup.procs (was %s, now %s)", r, strings.TrimSpace(string(cg)), strings.TrimSpace(string(now)))
		}
		errs = append(errs, err.Error())
	}
	blocked("%s", strings.Join(errs, "; "))
}

// attackOpenByHandleAt opens a host file from a file handle the runner took
// on the host (the "shocker" attack), relative to any directory on the
// same filesystem.
func attackOpenByHandle(p params) {
	raw, err := hex.DecodeString(p.get("handle"))
	if err != nil {
		fail("handle: %v", err)
	}
	typ := intParam(p, "type")
	mount := p.get("mount")
	mfd, err := unix.Open(mount, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		blocked("open %s: %v", mount, err)
	}
	h := unix.NewFileHandle(int32(typ), raw)
	fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
	if err != nil {
		blocked("open_by_handle_at: %v", err)
	}
	buf := make([]byte, 4096)
	n, _ := unix.Read(fd, buf)
	if token := p["token"]; token != "" && !bytes.Contains(buf[:n], []byte(token)) {
		blocked("open_by_handle_at opened something else: %s", short(buf[:n]))
	}
	escaped("open_by_handle_at read the host file: %s", short(buf[:n]))
}

// attackReplaceBinary tries to replace the agent's binary so the next
// sandbox runs the attacker's code.
func attackReplaceBinary(p params) {
	var errs []string
	paths := strings.Split(p.get("paths"), ",")
	if exe, err := os.Readlink("/proc/1/exe"); err == nil && p["proc1"] == "1" {
		paths = append(paths, exe)
	}
	for _, path := range paths {
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			_, werr := f.WriteAt([]byte("#!/bin/sh\n# airlock-escape\n"), 0)
			f.Close()
			if werr == nil {
				escaped("overwrote %s in place", path)
			}
			errs = append(errs, path+" write: "+werr.Error())
		} else {
			errs = append(errs, err.Error())
		}
		tmp := path + ".airlock-escape"
		if err := os.WriteFile(tmp, []byte("#!/bin/sh\n# airlock-escape\necho replaced\n"), 0o755); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			errs = append(errs, err.Error())
			continue
		}
		escaped("replaced %s by rename", path)
	}
	blocked("%s", strings.Join(errs, "; "))
}

// attackForkBomb forks raw children that only pause (cheap copies), up to
// cap, so an unlimited sandbox shows as escaped without starving the host.
func attackForkBomb(p params) {
	limit := intParam(p, "cap")
	var kids []int
	defer func() {
		for _, k := range kids {
			unix.Kill(k, unix.SIGKILL)
		}
	}()
	for len(kids) < limit {
		pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			for _, k := range kids {
				unix.Kill(k, unix.SIGKILL)
			}
			fmt.Printf("BLOCKED: process limit after %d children: %v\n", len(kids), e)
			os.Exit(exitBlocked)
		}
		if pid == 0 {
			for {
				unix.RawSyscall(unix.SYS_PAUSE, 0, 0, 0)
			}
		}
		kids = append(kids, int(pid))
	}
	for _, k := range kids {
		unix.Kill(k, unix.SIGKILL)
	}
	fmt.Printf("ESCAPED: forked %d processes without hitting a limit\n", len(kids))
	os.Exit(exitEscaped)
}
