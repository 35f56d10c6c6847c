package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/native"
)

// InitCommand is the hidden subcommand that becomes a container's
// process; ExecInitCommand becomes an exec'd one.
const (
	InitCommand     = "__oci-init"
	ExecInitCommand = "__oci-exec"
)

// Descriptors the init inherits.
const (
	fdPlan    = 3 // memfd: JSON initPlan (or execPlan)
	fdControl = 4 // SOCK_SEQPACKET to the runtime: "go" in, initStatus out
	fdFifo    = 5 // the exec fifo's read end (create only); -1 slot for exec
	fdConsole = 6 // connected console socket, when the process has a terminal
)

type initStatus struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Code is the exit code runc's callers expect for this failure (127
	// command not found, 126 cannot execute).
	Code int `json:"code,omitempty"`
}

type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// InitMain is `airlock __oci-init`: the container's process until start
// execs the user's program in its place. It only runs as the child
// `airlock oci create` started, reading its plan from inherited fds.
func InitMain() int { return stage2(false) }

// ExecInitMain is `airlock __oci-exec`: an exec'd process, already in the
// container's namespaces and cgroup, confining itself before exec.
func ExecInitMain() int { return stage2(true) }

func stage2(isExec bool) int {
	// Capability sets, the bounding set and the exec all belong to this
	// thread: the exec must happen from the thread that set them up.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Nothing of the runtime's may reach the program: the fifo's read
	// end above all, whose closing at exec tells start the program runs.
	CloseInheritedFDs()
	ctl := os.NewFile(fdControl, "control")
	report := func(err error) int {
		st := initStatus{Error: err.Error(), Code: 1}
		var ce *codeError
		if errors.As(err, &ce) {
			st.Code = ce.code
		}
		b, _ := json.Marshal(st)
		_, _ = ctl.Write(b)
		return st.Code
	}
	buf := make([]byte, 16)
	if _, err := ctl.Read(buf); err != nil {
		return report(fmt.Errorf("wait for the runtime: %w", err))
	}
	f := os.NewFile(fdPlan, "plan")
	var p initPlan
	err := json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&p)
	f.Close()
	if err != nil {
		return report(fmt.Errorf("read plan: %w", err))
	}
	if !isExec {
		if err := setupContainer(&p); err != nil {
			return report(err)
		}
	}
	exe, listener, err := confineSelf(&p.Proc, &p.Confine)
	if err != nil {
		return report(err)
	}
	b, _ := json.Marshal(initStatus{OK: true})
	var oob []byte
	if listener >= 0 {
		oob = unix.UnixRights(listener)
	}
	if err := unix.Sendmsg(fdControl, b, oob, nil, 0); err != nil {
		return 1
	}
	if listener >= 0 {
		unix.Close(listener)
	}
	ctl.Close()
	if !isExec {
		if err := waitStart(); err != nil {
			fmt.Fprintf(os.Stderr, "airlock-runc: %v\n", err)
			return 1
		}
	}
	err = unix.Exec(exe, p.Proc.Args, p.Proc.Env)
	fmt.Fprintf(os.Stderr, "airlock-runc: exec %s: %v\n", p.Proc.Args[0], err)
	return 126
}

// setupContainer does what only the container's init does: the root
// filesystem, hostname, sysctls and network.
func setupContainer(p *initPlan) error {
	if err := setupRoot(p); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	if p.Hostname != "" {
		if err := unix.Sethostname([]byte(p.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	if p.Domainname != "" {
		if err := unix.Setdomainname([]byte(p.Domainname)); err != nil {
			return fmt.Errorf("setdomainname: %w", err)
		}
	}
	if p.PrivateNet {
		// Policy network none: a network namespace with only loopback,
		// whatever the container was given (its hooks already ran).
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("private network namespace: %w", err)
		}
	}
	for _, kv := range p.Sysctl {
		file := "/proc/sys/" + strings.ReplaceAll(kv[0], ".", "/")
		if err := writeProcSys(file, kv[1]); err != nil {
			return fmt.Errorf("sysctl %s: %w", kv[0], err)
		}
	}
	if p.NewNet || p.PrivateNet {
		if err := native.LoopbackUp(); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
	}
	return nil
}

// writeProcSys writes a namespaced sysctl. /proc/sys is read-only in the
// container by now; a detached, writable clone of the proc mount (visible
// nowhere) reaches the same files.
func writeProcSys(file, val string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, "/proc", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	rel := strings.TrimPrefix(file, "/proc/")
	w, err := unix.Openat2(tree, rel, &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return err
	}
	defer unix.Close(w)
	_, err = unix.Write(w, []byte(val))
	return err
}

// confineSelf applies the process plan and Airlock's confinement to the
// calling process, in the order that keeps each step possible: rlimits,
// terminal, the executable's lookup, cwd, Landlock, credentials and
// capabilities, no_new_privs, then the seccomp floor and the container's
// filter. It returns the executable's path and the seccomp listener (-1).
func confineSelf(pp *procPlan, c *confinement) (string, int, error) {
	for _, r := range pp.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return "", -1, fmt.Errorf("rlimit %d: %w", r.Resource, err)
		}
	}
	if pp.OOMScore != nil {
		// Raising is always allowed; lowering needs CAP_SYS_RESOURCE,
		// which a host root may lack: the score then stays higher (safer).
		_ = os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(*pp.OOMScore)), 0)
	}
	if pp.Terminal {
		if err := setupTerminal(); err != nil {
			return "", -1, fmt.Errorf("terminal: %w", err)
		}
	}
	exe, err := lookExe(pp.Args[0], pp.Env)
	if err != nil {
		return "", -1, err
	}
	if err := unix.Chdir(pp.Cwd); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return "", -1, fmt.Errorf("chdir %s: %w", pp.Cwd, err)
		}
		if err := os.MkdirAll(pp.Cwd, 0o755); err != nil {
			return "", -1, fmt.Errorf("cwd %s: %w", pp.Cwd, err)
		}
		if err := unix.Chdir(pp.Cwd); err != nil {
			return "", -1, fmt.Errorf("chdir %s: %w", pp.Cwd, err)
		}
	}
	if pp.Umask != nil {
		unix.Umask(int(*pp.Umask))
	}
	if c.UseLandlock {
		if err := native.RestrictPaths(c.landlockRules(listDir)); err != nil {
			return "", -1, fmt.Errorf("landlock: %w", err)
		}
	}
	if err := setCredentials(pp, c.Ceiling); err != nil {
		return "", -1, err
	}
	// This thread execs; TSYNC below gives the other threads the flag.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", -1, fmt.Errorf("no_new_privs: %w", err)
	}
	listener := -1
	if len(c.Floor) > 0 {
		if listener, err = native.InstallSeccomp(c.Floor, c.Listen); err != nil {
			return "", -1, fmt.Errorf("seccomp floor: %w", err)
		}
	}
	if len(c.Filter) > 0 {
		if _, err := native.InstallSeccomp(c.Filter, false); err != nil {
			return "", -1, fmt.Errorf("seccomp (config.json): %w", err)
		}
	}
	return exe, listener, nil
}

// lookExe finds the program as execve will, in the container's root with
// the process's PATH, so that a missing one fails create (exit 127), as
// with runc.
func lookExe(name string, env []string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return unix.EACCES
		}
		return nil
	}
	if strings.Contains(name, "/") {
		if err := check(name); err != nil {
			code := 126
			if errors.Is(err, os.ErrNotExist) {
				code = 127
			}
			return "", &codeError{code, fmt.Errorf("exec: %q: %w", name, err)}
		}
		return name, nil
	}
	pathEnv := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, name)
		if check(p) == nil {
			return p, nil
		}
	}
	return "", &codeError{127, fmt.Errorf("exec: %q: executable file not found in $PATH", name)}
}

// setCredentials drops the bounding set to the ceiling, switches to the
// process's user and groups keeping capabilities, then sets the effective,
// permitted, inheritable and ambient sets (each already clamped).
func setCredentials(pp *procPlan, ceiling []int) error {
	keep := map[int]bool{}
	for _, c := range pp.Caps.Bounding {
		keep[c] = true
	}
	for c := range keep {
		if !contains(ceiling, c) {
			delete(keep, c)
		}
	}
	if err := native.DropBoundingSet(keep); err != nil {
		return fmt.Errorf("capability bounding set: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("keepcaps: %w", err)
	}
	groups := make([]int, len(pp.Groups))
	for i, g := range pp.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(pp.GID), int(pp.GID), int(pp.GID)); err != nil {
		return fmt.Errorf("setgid %d: %w", pp.GID, err)
	}
	if err := syscall.Setresuid(int(pp.UID), int(pp.UID), int(pp.UID)); err != nil {
		return fmt.Errorf("setuid %d: %w", pp.UID, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	set := func(caps []int, field func(d *unix.CapUserData) *uint32) {
		for _, c := range caps {
			if contains(ceiling, c) {
				*field(&data[c/32]) |= 1 << (uint(c) % 32)
			}
		}
	}
	set(pp.Caps.Effective, func(d *unix.CapUserData) *uint32 { return &d.Effective })
	set(pp.Caps.Permitted, func(d *unix.CapUserData) *uint32 { return &d.Permitted })
	set(pp.Caps.Inheritable, func(d *unix.CapUserData) *uint32 { return &d.Inheritable })
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	for _, c := range pp.Caps.Ambient {
		if !contains(ceiling, c) {
			continue
		}
		// The kernel raises an ambient capability only when it is both
		// permitted and inheritable; one that is not stays down (as runc
		// does, with a warning there).
		_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0)
	}
	return nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// waitStart blocks until `start` writes to the exec fifo; the fifo's read
// end closes on exec, which is how start knows the program runs.
func waitStart() error {
	pfd := []unix.PollFd{{Fd: fdFifo, Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(pfd, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for start: %w", err)
		}
		break
	}
	var b [1]byte
	if _, err := unix.Read(fdFifo, b[:]); err != nil {
		return fmt.Errorf("wait for start: %w", err)
	}
	return nil
}

// setupTerminal opens a pty in the container's devpts, sends its master to
// the runtime's caller over the console socket and makes the slave the
// process's controlling terminal and stdio.
func setupTerminal() error {
	master, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open ptmx: %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		return fmt.Errorf("pty number: %w", err)
	}
	slave, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("open pty slave: %w", err)
	}
	if err := unix.Sendmsg(fdConsole, []byte("/dev/ptmx"), unix.UnixRights(master), nil, 0); err != nil {
		unix.Close(slave)
		return fmt.Errorf("send console: %w", err)
	}
	unix.Close(fdConsole)
	// The process leads its own session (started with setsid).
	if err := unix.IoctlSetInt(slave, unix.TIOCSCTTY, 0); err != nil {
		unix.Close(slave)
		return fmt.Errorf("controlling terminal: %w", err)
	}
	for fd := 0; fd < 3; fd++ {
		if err := unix.Dup3(slave, fd, 0); err != nil {
			return err
		}
	}
	if slave > 2 {
		unix.Close(slave)
	}
	return nil
}
