package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/errdefs"
)

// Runtime runs containers from OCI bundles. Each method is one runc
// command; they may run concurrently on different containers (each is
// its own process, as runc's are).
type Runtime struct {
	// Root holds each container's state (ROOT/ID); DefaultRoot if empty.
	Root string
	// Operator is the ceiling; nil loads LoadOperatorConfig("").
	Operator *OperatorConfig
	// Binary is the airlock binary started as each container's init;
	// empty: /proc/self/exe.
	Binary string
	// Log receives debug and warning records; nil discards.
	Log *slog.Logger
}

func (r *Runtime) init() error {
	if r.Root == "" {
		r.Root = DefaultRoot
	}
	if r.Binary == "" {
		r.Binary = "/proc/self/exe"
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	if r.Operator == nil {
		op, err := LoadOperatorConfig("")
		if err != nil {
			return err
		}
		r.Operator = op
	}
	return nil
}

func (r *Runtime) store() store { return store{root: r.Root} }

// CreateOpts are `create`'s flags.
type CreateOpts struct {
	Bundle        string
	PidFile       string
	ConsoleSocket string
	NoPivot       bool
}

// setupTimeout bounds the init's setup and the hooks.
const setupTimeout = 60 * time.Second

// Create prepares the container id from its bundle up to the point where
// only the user's program is left to run, and returns: the container's
// process (its pid in PidFile) waits for Start. On error nothing is left:
// no process, cgroup or state.
func (r *Runtime) Create(ctx context.Context, id string, o CreateOpts) (err error) {
	c, err := r.prepareCreate(id, o)
	if err != nil {
		return err
	}
	var u undo.Stack
	defer func() {
		if err != nil {
			u.Run()
		}
	}()
	s := r.store()
	if err := r.makeStateAndCgroup(c, &u); err != nil {
		return err
	}
	if err := unix.Mkfifo(s.fifo(id), 0o600); err != nil {
		return fmt.Errorf("exec fifo: %w", err)
	}
	fifo, err := os.OpenFile(s.fifo(id), os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("exec fifo: %w", err)
	}
	defer fifo.Close()
	var console *os.File
	if c.plan.Proc.Terminal {
		if console, err = dialConsole(o.ConsoleSocket); err != nil {
			return err
		}
		defer console.Close()
	}
	clone, joins, err := namespacesFor(c.spec.Linux.Namespaces)
	if err != nil {
		return err
	}
	if c.plan.PrivateNet && s.joinsPrivateNet(joins) {
		// The pod's other containers share the empty namespace the
		// pause container got: the pod keeps one loopback.
		c.plan.PrivateNet = false
	}
	ch, err := r.spawn(InitCommand, c.plan, clone, joins, c.cg, []*os.File{fifo, console}, &u)
	if err != nil {
		return err
	}
	return r.finishCreate(ctx, c, ch, o.PidFile, &u)
}

// creation is what Create settled from the bundle before it makes
// anything.
type creation struct {
	id, bundle string
	spec       specs.Spec
	d          *decision
	cg         *cgroupPaths
	plan       *initPlan
}

// prepareCreate reads and checks the bundle and plans the container; it
// makes nothing.
func (r *Runtime) prepareCreate(id string, o CreateOpts) (*creation, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	c := &creation{id: id}
	var err error
	if c.bundle, err = filepath.Abs(o.Bundle); err != nil {
		return nil, fmt.Errorf("bundle: %v: %w", err, errdefs.ErrInvalid)
	}
	if err := readJSON(filepath.Join(c.bundle, "config.json"), &c.spec); err != nil {
		return nil, fmt.Errorf("bundle %s: %v: %w", c.bundle, err, errdefs.ErrInvalid)
	}
	if h := c.spec.Hooks; h != nil && (len(h.CreateContainer) > 0 || len(h.StartContainer) > 0) {
		return nil, fmt.Errorf("config.json: createContainer and startContainer hooks (run inside the container) are not supported: %w", errdefs.ErrNotSupported)
	}
	if c.d, err = decide(r.Operator, c.spec.Annotations); err != nil {
		return nil, err
	}
	if c.spec.Linux == nil {
		return nil, fmt.Errorf("config.json: linux is missing: %w", errdefs.ErrInvalid)
	}
	if c.cg, err = resolveCgroups(c.spec.Linux.CgroupsPath, id); err != nil {
		return nil, err
	}
	if c.plan, err = buildPlan(id, c.bundle, &c.spec, r.Operator, c.d, native.HostFeatures(), c.cg); err != nil {
		return nil, err
	}
	c.plan.NoPivot = o.NoPivot
	if c.plan.Proc.Terminal && o.ConsoleSocket == "" {
		return nil, fmt.Errorf("process.terminal is set but no --console-socket was given: %w", errdefs.ErrInvalid)
	}
	return c, nil
}

// makeStateAndCgroup makes the container's state directory (refusing an
// id in use) and its cgroup, each undone on u.
func (r *Runtime) makeStateAndCgroup(c *creation, u *undo.Stack) error {
	s := r.store()
	if err := os.MkdirAll(r.Root, 0o700); err != nil {
		return fmt.Errorf("state root %s: %w", r.Root, err)
	}
	if err := os.Mkdir(s.dir(c.id), 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("container with id exists: %s: %w", c.id, errdefs.ErrExists)
		}
		return fmt.Errorf("state dir: %w", err)
	}
	u.Push(func() { _ = os.RemoveAll(s.dir(c.id)) })
	lim := cgroupfs.Limits{Memory: int64(c.d.pol.Limits.Memory), Pids: c.d.pol.Limits.Pids, CPUs: c.d.pol.Limits.CPUs}
	if err := c.cg.create(c.spec.Linux.Resources, lim); err != nil {
		return err
	}
	u.Push(func() { _ = c.cg.remove() })
	return nil
}

// finishCreate runs the create hooks, lets the spawned init finish its
// setup, starts the monitor (undone on u) and saves the state and the pid
// file.
func (r *Runtime) finishCreate(ctx context.Context, c *creation, ch *child, pidFile string, u *undo.Stack) error {
	s := r.store()
	st := &containerState{ID: c.id, Bundle: c.bundle, Rootfs: c.plan.Rootfs, Pid: ch.pid, PidStart: ch.start,
		Created: time.Now().UTC(), Annotations: c.spec.Annotations, Cgroups: *c.cg, Policy: c.d.name,
		Confine: c.plan.Confine, PrivateNet: c.plan.PrivateNet, Hooks: c.spec.Hooks, Env: c.plan.Proc.Env}
	if h := c.spec.Hooks; h != nil {
		state := s.ociState(st)
		state.Status = "creating"
		//lint:ignore SA1019 dockerd's network setup (libnetwork-setkey) is a prestart hook
		prestart := h.Prestart
		for _, hooks := range [][]specs.Hook{prestart, h.CreateRuntime} {
			if err := runHooks(ctx, hooks, state); err != nil {
				return err
			}
		}
	}
	listener, err := ch.proceed(ctx)
	if err != nil {
		return err
	}
	if listener >= 0 {
		pid, start, err := r.startMonitor(c.id, ch.pid, listener, c.plan, c.d.pol)
		if err != nil {
			return err
		}
		st.Monitor, st.MonitorStart = pid, start
		u.Push(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if err := s.save(st); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if pidFile != "" {
		if err := writePidFile(pidFile, ch.pid); err != nil {
			return err
		}
	}
	r.Log.Debug("container created", "id", c.id, "pid", ch.pid, "policy", c.d.name)
	return nil
}

// CloseInheritedFDs marks every descriptor above stderr close-on-exec: the
// runtime's callers leave theirs open (the shim's log pipe among them),
// and none may reach a container, a monitor or a hook. Called once at the
// start of every runtime command.
func CloseInheritedFDs() { agent.CloexecInherited() }

// child is a stage-2 process the runtime started and is setting up.
type child struct {
	pid   int
	start uint64
	cmd   *exec.Cmd
	ctl   *net.UnixConn
	cg    *cgroupPaths
}

// spawn starts `airlock CMD` with the plan in the container's namespaces
// (joining those config.json names by path, creating the others) and
// cgroups. The process waits for proceed.
func (r *Runtime) spawn(cmdName string, plan *initPlan, clone uintptr, joins []nsJoin, cg *cgroupPaths, extra []*os.File, u *undo.Stack) (*child, error) {
	memfd, err := planFile(plan)
	if err != nil {
		return nil, err
	}
	defer memfd.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "control")
	initEnd := os.NewFile(uintptr(fds[1]), "control-init")
	defer initEnd.Close()
	conn, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ctl := conn.(*net.UnixConn)
	u.Push(func() { ctl.Close() })

	defer func() {
		for _, j := range joins {
			j.f.Close()
		}
	}()
	cmd := exec.Command(r.Binary, cmdName)
	cmd.Args[0] = "airlock-runc-init"
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = append([]*os.File{memfd, initEnd}, extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: clone, Setsid: true}
	cgfd := cg.v2FD()
	if cgfd >= 0 {
		defer unix.Close(cgfd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
	}
	if err := startIn(cmd, joins); err != nil {
		return nil, err
	}
	// Never waited for on success: the process must outlive us and its
	// exit status belongs to our caller's subreaper (the shim), which
	// inherits it (reaping it here would steal a short-lived exec's).
	u.Push(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	ch := &child{pid: cmd.Process.Pid, cmd: cmd, ctl: ctl, cg: cg}
	if ch.start, _, err = procStart(ch.pid); err != nil {
		return nil, fmt.Errorf("init %d: %w", ch.pid, err)
	}
	if err := cg.join(ch.pid); err != nil {
		return nil, err
	}
	return ch, nil
}

// proceed lets the child set up and returns the seccomp listener it
// sent (-1 without).
func (ch *child) proceed(ctx context.Context) (int, error) {
	if _, err := ch.ctl.Write([]byte("go")); err != nil {
		return -1, fmt.Errorf("init exited before setup: %w", errdefs.ErrUnavailable)
	}
	dl := time.Now().Add(setupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = ch.ctl.SetReadDeadline(dl)
	buf := make([]byte, 8192)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := ch.ctl.ReadMsgUnix(buf, oob)
	if err != nil || n == 0 {
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return -1, fmt.Errorf("container init did not report (exited or hung during setup): %w", errdefs.ErrUnavailable)
		}
		return -1, fmt.Errorf("container init: %v: %w", err, errdefs.ErrUnavailable)
	}
	listener := -1
	if oobn > 0 {
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) > 0 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) > 0 {
				listener = fds[0]
			}
		}
	}
	var st initStatus
	if err := json.Unmarshal(buf[:n], &st); err != nil {
		return -1, fmt.Errorf("container init status: %v: %w", err, errdefs.ErrUnavailable)
	}
	if !st.OK {
		if listener >= 0 {
			unix.Close(listener)
		}
		kind := errdefs.ErrUnavailable
		switch st.Code {
		case 127:
			kind = errdefs.ErrCommandNotFound
		case 126:
			kind = errdefs.ErrCannotExecute
		}
		return -1, fmt.Errorf("%s: %w", st.Error, kind)
	}
	return listener, nil
}

// namespacesFor returns the namespaces to create (a mount namespace
// always) and those to join (opened and checked), from config.json.
func namespacesFor(nss []specs.LinuxNamespace) (uintptr, []nsJoin, error) {
	clone := uintptr(unix.CLONE_NEWNS)
	var joins []nsJoin
	for _, n := range nss {
		flag, ok := nsFlags[n.Type]
		if !ok || n.Type == specs.MountNamespace {
			continue
		}
		if n.Path == "" {
			clone |= flag
			continue
		}
		j, err := openNamespace(n.Path, flag)
		if err != nil {
			for _, j := range joins {
				j.f.Close()
			}
			return 0, nil, err
		}
		joins = append(joins, j)
	}
	return clone, joins, nil
}

// nsJoin is a namespace to enter before the child is cloned.
type nsJoin struct {
	f    *os.File
	flag int
}

var nsFlags = map[specs.LinuxNamespaceType]uintptr{
	specs.PIDNamespace: unix.CLONE_NEWPID, specs.NetworkNamespace: unix.CLONE_NEWNET,
	specs.MountNamespace: unix.CLONE_NEWNS, specs.IPCNamespace: unix.CLONE_NEWIPC,
	specs.UTSNamespace: unix.CLONE_NEWUTS, specs.CgroupNamespace: unix.CLONE_NEWCGROUP,
}

// openNamespace opens a namespace file and checks it is one of type flag.
func openNamespace(p string, flag uintptr) (nsJoin, error) {
	f, err := os.Open(p)
	if err != nil {
		return nsJoin{}, fmt.Errorf("namespace %s: %v: %w", p, err, errdefs.ErrInvalid)
	}
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil || uintptr(t) != flag {
		f.Close()
		return nsJoin{}, fmt.Errorf("namespace %s is not a namespace of the type config.json says: %w", p, errdefs.ErrInvalid)
	}
	return nsJoin{f: f, flag: int(flag)}, nil
}

// startIn starts cmd from a thread that entered joins first (namespaces
// are per thread; the clone inherits the thread's). The thread is never
// given back to the Go scheduler: it dies with its goroutine.
func startIn(cmd *exec.Cmd, joins []nsJoin) error {
	if len(joins) == 0 {
		return startErr(cmd.Start())
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is tainted
		for _, j := range joins {
			if j.flag == unix.CLONE_NEWNS {
				if err := unix.Unshare(unix.CLONE_FS); err != nil {
					errc <- fmt.Errorf("unshare fs: %w", err)
					return
				}
			}
			if err := unix.Setns(int(j.f.Fd()), j.flag); err != nil {
				errc <- fmt.Errorf("join namespace %s: %v: %w", j.f.Name(), err, errdefs.ErrUnavailable)
				return
			}
		}
		errc <- startErr(cmd.Start())
	}()
	return <-errc
}

func startErr(err error) error {
	if err != nil {
		return fmt.Errorf("start container init: %v: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}

func planFile(plan *initPlan) (*os.File, error) {
	fd, err := unix.MemfdCreate("airlock-oci-plan", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	f := os.NewFile(uintptr(fd), "plan")
	if err := json.NewEncoder(f).Encode(plan); err != nil {
		f.Close()
		return nil, fmt.Errorf("plan: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("plan: %w", err)
	}
	return f, nil
}

// dialConsole connects to the caller's console socket; the container's
// init sends the pty master over it.
func dialConsole(path string) (*os.File, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("console socket %s: %v: %w", path, err, errdefs.ErrInvalid)
	}
	defer c.Close()
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	return f, nil
}

// writePidFile writes pid atomically (a reader never sees half a pid).
func writePidFile(file string, pid int) error {
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pid file: %w", err)
	}
	return nil
}
