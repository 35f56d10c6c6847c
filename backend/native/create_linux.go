package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"golang.org/x/sys/unix"
)

// validSandboxID: 1-128 of [A-Za-z0-9_.-], not starting with . _ or -
// (IDs name cgroup and state files; no regexp to keep process start cheap).
func validSandboxID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// setupTimeout bounds the init's setup when the caller's context has no
// deadline.
const setupTimeout = 60 * time.Second

// egressAddr is where the in-sandbox agent listens for proxy clients.
const egressAddr = "127.0.0.1:3128"

// directIO, for the backend's own tests, makes the init run a command
// itself with these stdio streams instead of serving the agent.
type directIO struct {
	Args           []string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Create starts a sandbox. See sandbox.Backend.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	s, err := b.create(ctx, spec, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (b *Backend) create(ctx context.Context, spec sandbox.Spec, direct *directIO) (_ *nativeSandbox, err error) {
	if !validSandboxID(spec.ID) {
		return nil, fmt.Errorf("create sandbox %q: invalid id: %w", spec.ID, sandbox.ErrInvalid)
	}
	wrap := func(format string, args ...any) error {
		return fmt.Errorf("create sandbox %q: "+format, append([]any{spec.ID}, args...)...)
	}
	if spec.Policy == nil {
		return nil, wrap("nil policy: %w", sandbox.ErrInvalid)
	}
	pol := spec.Policy
	if spec.Image != "" && pol.Filesystem.Rootfs != spec.Image {
		// For native, an image is a root filesystem directory.
		pol = pol.Clone()
		pol.Filesystem.Rootfs = spec.Image
	}
	log := spec.Log
	if log == nil {
		log = b.log
	}
	log = log.With("sandbox", spec.ID)
	sink := spec.Audit
	if sink == nil {
		sink = audit.Discard
	}
	feats := b.features()
	t0 := time.Now()

	// Fail closed on anything the policy needs that the host lacks.
	var degraded []string
	need := func(ok bool, what string) error {
		if ok {
			return nil
		}
		if !pol.AllowDegraded {
			return wrap("%s: %w", what, sandbox.ErrUnavailable)
		}
		degraded = append(degraded, what)
		return nil
	}
	if !feats.UserNamespaces {
		return nil, wrap("user namespaces not available (%s): %w", feats.UserNamespacesReason, sandbox.ErrUnavailable)
	}
	if err := need(feats.LandlockABI > 0, "landlock not supported by this kernel"); err != nil {
		return nil, err
	}
	var filter filterSpec
	useSeccomp := feats.Seccomp && feats.SeccompArch
	if err := need(useSeccomp, "seccomp filter not available on this host"); err != nil {
		return nil, err
	}
	if useSeccomp {
		if filter, err = buildFilter(feats.SeccompUserNotif); err != nil {
			return nil, wrap("%v: %w", err, sandbox.ErrUnavailable)
		}
	}
	uid, gid, err := pol.Process.Credentials(os.Getuid(), os.Getgid())
	if err != nil {
		return nil, wrap("%w", err)
	}

	// Host-side preparation. From here on every step registers its undo.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	// The cgroup2 directory exists before the clone (the init is born in
	// it). Everything else the init needs (mount plan, configuration,
	// placeholders, v1 cgroups, limits) is prepared while its runtime
	// starts: it reads its configuration only after the host's "go".
	t0Plan := time.Now()
	lim := cgroupLimits{Memory: int64(pol.Limits.Memory), Pids: pol.Limits.Pids, CPUs: pol.Limits.CPUs}
	cg := newCgroupV2(hostCgroups(), b.cfg.CgroupParent, spec.ID, lim)
	undo = append(undo, func() { cg.kill(); _ = cg.remove() })
	tCgroup := time.Now()
	env := environ(pol, spec.Env)
	memfd, err := emptyConfigFile()
	if err != nil {
		return nil, wrap("init config: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer memfd.Close()
	ctlHost, ctlInit, err := socketpair(unix.SOCK_SEQPACKET)
	if err != nil {
		return nil, wrap("control socket: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer ctlInit.Close()
	undo = append(undo, func() { ctlHost.Close() })
	chHost, chInit, err := socketpair(unix.SOCK_STREAM)
	if err != nil {
		return nil, wrap("channel: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer chInit.Close()
	undo = append(undo, func() { chHost.Close() })

	cmd := exec.Command(b.cfg.AgentBinary, InitCommand)
	cmd.Args[0] = "airlock-init"
	// One P: the init is I/O bound, starts faster, and has fewer threads
	// for the all-threads capability drop to stop.
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.ExtraFiles = []*os.File{memfd, ctlInit, chInit}
	stderr := &boundedBuffer{max: 8 << 10}
	if direct != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = direct.Stdin, direct.Stdout, direct.Stderr
	} else {
		cmd.Stderr = stderr
	}
	cmd.SysProcAttr = sysProcAttr(uid, gid, feats.Rootless, cg)
	tPrep := time.Now()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
			return nil, wrap("start init %s: %v: %w", b.cfg.AgentBinary, err, sandbox.ErrUnavailable)
		}
		return nil, wrap("start init (namespaces: %s): %v: %w", "user,mount,pid,net,ipc,uts,cgroup", err, sandbox.ErrUnavailable)
	}
	tForked := time.Now()
	waited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(waited) }()
	undo = append(undo, func() {
		_ = cmd.Process.Kill()
		cg.kill()
		<-waited
	})
	// While the init's runtime starts (it waits for "go" before touching
	// anything): mount plan and configuration, placeholders, state, v1
	// cgroups and limits.
	plan, err := buildPlan(pol, spec.Files, !feats.Rootless && uid == 0)
	if err != nil {
		return nil, wrap("%w", err)
	}
	tPlan := time.Now()
	cfg := initConfig{
		ID:            spec.ID,
		Hostname:      "airlock",
		RootSize:      rootSize(spec.Files),
		Mounts:        plan.Mounts,
		Landlock:      append(plan.Landlock, llRule{Access: llReadDir, Path: "/"}),
		UseLandlock:   feats.LandlockABI > 0,
		Seccomp:       filter.Prog,
		SeccompNotify: feats.SeccompUserNotif,
		Rlimits:       rlimits(pol),
		Workdir:       pol.Process.Workdir,
	}
	if direct != nil {
		cfg.Exec = direct.Args
		cfg.Env = direct.Env
		if cfg.Env == nil {
			cfg.Env = env
		}
	}
	if err := json.NewEncoder(memfd).Encode(&cfg); err != nil {
		return nil, wrap("init config: %v: %w", err, sandbox.ErrUnavailable)
	}
	var placeholders []placeholder
	undo = append(undo, func() { _ = removePlaceholders(placeholders) })
	placeholders, err = createPlaceholders(pol.Filesystem.WorkspacePath(), plan.Pending)
	if err != nil {
		return nil, wrap("%v: %w", err, sandbox.ErrUnavailable)
	}
	if len(placeholders) > 0 {
		if err := b.writeState(spec.ID, placeholders); err != nil {
			return nil, wrap("write state: %v: %w", err, sandbox.ErrUnavailable)
		}
		undo = append(undo, func() { b.removeState(spec.ID) })
	}
	tPlaced := time.Now()
	missing, err := cg.finish(hostCgroups(), b.cfg.CgroupParent, spec.ID, lim)
	if err != nil {
		return nil, wrap("cgroup: %v: %w", err, sandbox.ErrUnavailable)
	}
	for _, m := range missing {
		if err := need(false, m.String()); err != nil {
			return nil, err
		}
	}
	if err := cg.joinV1(cmd.Process.Pid); err != nil {
		return nil, wrap("%v: %w", err, sandbox.ErrUnavailable)
	}
	tStart := time.Now()
	hctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		// A setup step that hangs must not hang Create forever.
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, setupTimeout)
		defer cancel()
	}
	// The agent's Hello is sent now and waits in the channel until the
	// init serves it: one fewer host<->init wake-up on the start path.
	var client *agent.Client
	helloDone := make(chan error, 1)
	if direct == nil {
		guestEgress := ""
		if pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone && spec.Egress != nil {
			guestEgress = egressAddr
		}
		client, err = agent.NewClient(chHost, agent.ClientOptions{
			SandboxID: spec.ID, Log: log, Audit: sink, Egress: spec.Egress,
			OutputLimit: int64(pol.Limits.OutputBytes),
		})
		if err != nil {
			return nil, wrap("agent: %v: %w", err, sandbox.ErrUnavailable)
		}
		undo = append(undo, func() { client.Close() })
		gc := agent.GuestConfig{Env: env, Workdir: pol.Process.Workdir, UID: -1, GID: -1, EgressAddr: guestEgress}
		go func() { helloDone <- client.Hello(hctx, gc) }()
	} else {
		chHost.Close()
		helloDone <- nil
	}
	listener, initTiming, err := handshake(hctx, ctlHost, waited)
	if err != nil {
		if errors.Is(err, errInitExited) {
			<-waited
			msg := stderr.String()
			if msg == "" && waitErr != nil {
				msg = waitErr.Error()
			}
			return nil, wrap("init exited during setup: %s: %w", msg, sandbox.ErrUnavailable)
		}
		return nil, wrap("%w", err)
	}
	ctlHost.Close()
	tSetup := time.Now()

	s := &nativeSandbox{
		id: spec.ID, b: b, log: log, audit: sink, cmd: cmd, cg: cg, client: client,
		placeholders: placeholders, waited: waited, done: make(chan struct{}), stderr: stderr,
	}
	if listener >= 0 {
		sup, err := newSupervisor(listener, s.violation)
		if err != nil {
			unix.Close(listener)
			return nil, wrap("seccomp supervisor: %v: %w", err, sandbox.ErrUnavailable)
		}
		s.sup = sup
		undo = append(undo, sup.stop)
	}
	if err := <-helloDone; err != nil {
		return nil, wrap("agent hello: %w", err)
	}
	log.Debug("sandbox started", "cgroup2", tCgroup.Sub(t0Plan), "prepare", tPrep.Sub(t0), "clone", tStart.Sub(tPrep), "fork", tForked.Sub(tPrep), "plan", tPlan.Sub(tForked), "placeholders", tPlaced.Sub(tPlan), "cgroup_v1", tStart.Sub(tPlaced),
		"init_setup", tSetup.Sub(tStart), "hello", time.Since(tSetup), "init_us", initTiming)
	go s.watch()
	if t := pol.Limits.Timeout.D(); t > 0 {
		s.timer = time.AfterFunc(t, s.timeout)
	}
	for _, d := range degraded {
		log.Warn("protection waived by allow_degraded", "what", d)
		sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeDegraded, Message: d})
	}
	sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pid": cmd.Process.Pid, "landlock_abi": feats.LandlockABI,
		"seccomp_notify": listener >= 0, "cgroup": feats.CgroupVersion,
	}})
	return s, nil
}

var errInitExited = errors.New("init exited")

// handshake lets the init proceed and reads its status; it returns the
// seccomp listener fd, or -1.
func handshake(ctx context.Context, ctl *net.UnixConn, waited <-chan struct{}) (int, map[string]int64, error) {
	if _, err := ctl.Write([]byte("go")); err != nil {
		return -1, nil, errInitExited
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = ctl.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = ctl.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			return -1, nil, fmt.Errorf("wait for init: %w", ctx.Err())
		}
		return -1, nil, errInitExited
	}
	listener := -1
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) > 0 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) > 0 {
				listener = fds[0]
				for _, fd := range fds[1:] {
					unix.Close(fd)
				}
			}
		}
	}
	if n == 0 {
		if listener >= 0 {
			unix.Close(listener)
		}
		return -1, nil, errInitExited
	}
	var st initStatus
	if err := json.Unmarshal(buf[:n], &st); err != nil || !st.OK {
		if listener >= 0 {
			unix.Close(listener)
		}
		if err != nil {
			return -1, nil, fmt.Errorf("init status: %v: %w", err, sandbox.ErrUnavailable)
		}
		if st.Stage == "" {
			st.Stage = "setup"
		}
		return -1, nil, fmt.Errorf("init %s: %s: %w", st.Stage, st.Error, sandbox.ErrUnavailable)
	}
	return listener, st.Timing, nil
}

func sysProcAttr(uid, gid int, rootless bool, cg *sandboxCgroup) *syscall.SysProcAttr {
	hostUID, hostGID := uid, gid
	if rootless {
		hostUID, hostGID = os.Geteuid(), os.Getegid()
	}
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: hostUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: hostGID, Size: 1}},
		// The init keeps the capabilities it needs for setup across exec
		// even when its uid inside is not 0; it drops all of them itself.
		AmbientCaps: []uintptr{
			unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE,
			unix.CAP_SYS_RESOURCE, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_FOWNER,
		},
		Pdeathsig: syscall.SIGKILL,
		Setsid:    true,
	}
	if !rootless {
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if cg != nil && cg.v2FD >= 0 {
		attr.UseCgroupFD = true
		attr.CgroupFD = cg.v2FD
	}
	return attr
}

func socketpair(typ int) (host *net.UnixConn, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	hf := os.NewFile(uintptr(fds[0]), "host")
	defer hf.Close()
	c, err := net.FileConn(hf)
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "init"), nil
}

// emptyConfigFile is the memfd the init reads its configuration from; the
// host writes it after the clone, before the "go".
func emptyConfigFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("airlock-init", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "airlock-init"), nil
}

func rootSize(files []sandbox.File) int64 {
	n := int64(4 << 20)
	for _, f := range files {
		n += int64(len(f.Data)) + 4096
	}
	return n
}

func rlimits(pol *policy.Policy) []rlimit {
	out := []rlimit{{Resource: unix.RLIMIT_CORE}}
	if n := pol.Limits.OpenFiles; n > 0 {
		out = append(out, rlimit{Resource: unix.RLIMIT_NOFILE, Cur: uint64(n), Max: uint64(n)})
	}
	return out
}

// environ is the sandbox's base environment: the policy's, then the
// host components' (egress proxy variables, secret placeholders).
func environ(pol *policy.Policy, extra map[string]string) []string {
	base := pol.Environ(os.Environ())
	if len(extra) == 0 {
		return base
	}
	m := map[string]string{}
	order := []string{}
	for _, kv := range base {
		k, v, _ := cut(kv)
		m[k] = v
		order = append(order, k)
	}
	for k, v := range extra {
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	sort.Strings(order)
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// boundedBuffer keeps the first max bytes written (the init's stderr).
type boundedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.b); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		w.b = append(w.b, p[:room]...)
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
