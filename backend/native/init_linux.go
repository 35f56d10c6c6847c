package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/agent"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ServeFunc serves the agent protocol on conn inside a ready sandbox.
type ServeFunc func(ctx context.Context, conn io.ReadWriteCloser) error

// stageError names the setup step that failed.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

func stage(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{name, err}
}

// InitMain runs a sandbox's init: it is what `airlock __native-init` calls.
// It must only ever run as the child the native backend started (it reads
// its configuration from inherited descriptors). It returns the process
// exit code.
func InitMain(serve ServeFunc) int {
	ctl := os.NewFile(fdControl, "control")
	// The host writes the configuration while our runtime starts and says
	// "go" when it (and the placeholders, v1 cgroups) are ready.
	err := waitForHost(ctl)
	var cfg *initConfig
	if err == nil {
		cfg, err = readInitConfig()
	}
	if err == nil && cfg.DropGroups {
		err = stage("drop supplementary groups", syscall.Setgroups([]int{}))
	}
	if err == nil {
		err = setupSandbox(cfg, ctl)
	}
	if err != nil {
		st := initStatus{Error: err.Error()}
		var se *stageError
		if errors.As(err, &se) {
			st.Stage = se.stage
		}
		b, _ := json.Marshal(st)
		_, _ = ctl.Write(b)
		fmt.Fprintf(os.Stderr, "airlock init: %v\n", err)
		return 1
	}
	ctl.Close()
	if len(cfg.Exec) > 0 {
		return directExec(cfg)
	}
	if serve == nil {
		fmt.Fprintln(os.Stderr, "airlock init: no agent in this build")
		return 1
	}
	f := os.NewFile(fdChannel, "channel")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock init: channel: %v\n", err)
		return 1
	}
	go releaseStartupMemory()
	if err := serve(context.Background(), conn); err != nil {
		fmt.Fprintf(os.Stderr, "airlock init: serve: %v\n", err)
		return 1
	}
	return 0
}

// releaseStartupMemory hands the heap the set-up used (the configuration,
// the rootfs plan, the seccomp program) back to the kernel once the
// sandbox has started: an idle sandbox's init then holds little more than
// its Go runtime. After a second, so that it never delays the first exec.
func releaseStartupMemory() {
	time.Sleep(time.Second)
	debug.FreeOSMemory()
}

func readInitConfig() (*initConfig, error) {
	f := os.NewFile(fdConfig, "config")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, stage("read config", err)
	}
	var cfg initConfig
	if err := json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&cfg); err != nil {
		return nil, stage("read config", err)
	}
	return &cfg, nil
}

// waitForHost waits for the host's go-ahead: our configuration is written,
// the placeholders we mount exist and we are in the v1 cgroups by now.
func waitForHost(ctl *os.File) error {
	// Nothing inside may read our memory or ptrace us (same uid). When
	// the host's newuidmap maps us (subid_linux.go), only after: it maps
	// only a process of the caller's, which a non-dumpable one is not.
	// Until then nothing runs inside, and the caller's own processes own
	// our user namespace anyway.
	idmapPending := os.Getenv("AIRLOCK_INIT_IDMAP") == "1"
	if !idmapPending {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*maxMapped))
	_, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if idmapPending {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	if err != nil {
		return stage("wait for host", err)
	}
	// The idmapped layers of an image root (mapOverlay) come with it.
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return stage("wait for host", err)
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			return stage("wait for host", err)
		}
		receivedLayers = append(receivedLayers, fds...)
	}
	return nil
}

// receivedLayers are the descriptors the host sent with the "go".
var receivedLayers []int

// setupSandbox does, in order: root filesystem, network, hostname,
// rlimits, Landlock, capabilities, no_new_privs, seccomp; and reports
// success, passing the seccomp listener.
func setupSandbox(cfg *initConfig, ctl *os.File) error {
	t0 := time.Now()
	timing := map[string]int64{}
	mark := func(name string) {
		now := time.Now()
		timing[name] = now.Sub(t0).Microseconds()
		t0 = now
	}
	if err := buildRoot(cfg); err != nil {
		return err
	}
	mark("rootfs")
	if err := stage("loopback", loopbackUp()); err != nil {
		return err
	}
	if cfg.Hostname != "" {
		if err := stage("hostname", unix.Sethostname([]byte(cfg.Hostname))); err != nil {
			return err
		}
	}
	for _, r := range cfg.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return stage(fmt.Sprintf("rlimit %d", r.Resource), err)
		}
	}
	if cfg.Workdir != "" {
		if cfg.Overlay != nil {
			// An image's working directory is made when missing, as
			// Docker does (in the sandbox's own layer).
			_ = os.MkdirAll(cfg.Workdir, 0o755)
		}
		if err := stage("chdir "+cfg.Workdir, unix.Chdir(cfg.Workdir)); err != nil {
			return err
		}
	}
	mark("net_rlimits")
	if cfg.UseLandlock {
		if err := stage("landlock", applyLandlock(cfg.Landlock)); err != nil {
			return err
		}
	}
	mark("landlock")
	// The capability bounding set is per thread and only matters for what
	// exec could grant (which no_new_privs, empty sets and locked
	// securebits already stop). Dropping it on every thread costs ~45
	// stop-the-world syscalls; instead it is dropped on the one thread that
	// forks every sandboxed process, which they inherit it from.
	if len(cfg.KeepCaps) > 0 {
		// Root inside keeps its capabilities over its own namespace.
		if err := stage("keep root's capabilities", keepCapabilities(cfg.KeepCaps)); err != nil {
			return err
		}
	} else if err := dropAll(len(cfg.Exec) > 0); err != nil {
		return err
	}
	mark("capabilities")
	listener := -1
	if len(cfg.Seccomp) > 0 {
		fd, err := installFilter(cfg.Seccomp, cfg.SeccompNotify)
		if err != nil {
			return stage("seccomp", err)
		}
		listener = fd
	}
	mark("seccomp")
	b, _ := json.Marshal(initStatus{OK: true, Timing: timing})
	var oob []byte
	if listener >= 0 {
		oob = unix.UnixRights(listener)
	}
	if err := unix.Sendmsg(int(ctl.Fd()), b, oob, nil, 0); err != nil {
		return stage("report", err)
	}
	if listener >= 0 {
		unix.Close(listener)
	}
	return nil
}

// dropAll drops every capability (allThreadsBounding: the bounding set
// on every thread; direct mode forks from any thread).
func dropAll(allThreadsBounding bool) error {
	if !allThreadsBounding {
		if err := stage("drop capability bounding set", agent.PrepareSpawnThread(dropBoundingSet)); err != nil {
			return err
		}
	}
	return stage("drop capabilities", dropCapabilities(allThreadsBounding))
}

// dropBoundingSet empties the capability bounding set of the calling thread.
func dropBoundingSet() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bounding set %d: %w", c, err)
		}
	}
	return nil
}

// dropCapabilities empties the effective, permitted, inheritable and
// ambient capability sets on every thread (the bounding set too when
// boundingAllThreads), locks the securebits so that exec as uid 0 inside
// gains nothing, and sets no_new_privs.
func dropCapabilities(boundingAllThreads bool) error {
	const (
		secbitNoroot            = 1 << 0
		secbitNorootLocked      = 1 << 1
		secbitNoSetuidFixup     = 1 << 2
		secbitNoSetuidFixupLock = 1 << 3
		secbitKeepCapsLocked    = 1 << 5
		secbitNoCapAmbientRaise = 1 << 6
		secbitNoCapAmbientLock  = 1 << 7
	)
	all := allThreads
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixupLock | secbitKeepCapsLocked |
		secbitNoCapAmbientRaise | secbitNoCapAmbientLock
	_ = secbitNoSetuidFixup
	if err := all(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, uintptr(bits), 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; boundingAllThreads && c <= unix.CAP_LAST_CAP; c++ {
		if err := all(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bounding set %d: %w", c, err)
		}
	}
	if err := all(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("ambient: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := all(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := all(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// loopbackUp brings lo up in the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// directExec runs cfg.Exec as the init's only child, reaping every orphan,
// and returns its exit code (128+signal when killed).
func directExec(cfg *initConfig) int {
	p, err := os.StartProcess(lookPath(cfg.Exec[0], cfg.Env), cfg.Exec, &os.ProcAttr{
		Env:   cfg.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock init: exec %s: %v\n", cfg.Exec[0], err)
		if errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == p.Pid {
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

func lookPath(name string, env []string) string {
	if len(name) > 0 && name[0] == '/' {
		return name
	}
	path := "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}
