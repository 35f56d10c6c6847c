package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/fsguard"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// setupTimeout bounds the init's setup when the caller's context has no
// deadline.
const setupTimeout = 60 * time.Second

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

// create runs the stages in order: prepare (decide, touch nothing), spawn
// (cgroup, init process), configure (mount plan, init config, limits) and
// connect (the init's setup, the agent, the seccomp supervisor). Each
// stage registers what undoes it; a failure undoes everything.
func (b *Backend) create(ctx context.Context, spec sandbox.Spec, direct *directIO) (_ *nativeSandbox, err error) {
	p, err := b.prepare(spec)
	if err != nil {
		return nil, err
	}
	var undo undo.Stack
	defer func() {
		if err != nil {
			undo.Run()
		}
	}()
	b.reclaimStale()
	if b.cfg.HostIDs != nil && !p.feats.Rootless {
		if p.lease, err = b.cfg.HostIDs.Lease(); err != nil {
			return nil, p.wrap("%w", err)
		}
		undo.Push(p.lease.Release)
		p.rootCaps = keepsRootCaps(p, p.spec.Root != nil)
		c := hostCreds(p)
		if err := hostfs.OwnWorkspace(p.spec, c.UID, c.GID); err != nil {
			return nil, p.wrap("%w", err)
		}
	}
	if b.cfg.HostIDs != nil && p.feats.Rootless {
		// A normal user's subordinate ids (subid_linux.go).
		if _, _, err := idmap.Tools(); err != nil {
			return nil, p.wrap("%w", err)
		}
		if p.lease, err = b.cfg.HostIDs.Lease(); err != nil {
			return nil, p.wrap("%w", err)
		}
		undo.Push(p.lease.Release)
		p.rootCaps = keepsRootCaps(p, p.spec.Root != nil)
	}
	st, err := b.spawn(p, direct, &undo)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	defer st.closeChildEnds()
	plan, err := b.configure(p, st, direct, &undo)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	s, err := b.connect(ctx, p, st, plan, direct, &undo)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	return s, nil
}

// prepared is everything create decides before touching the host.
type prepared struct {
	spec     sandbox.Spec
	pol      *policy.Policy
	log      *slog.Logger
	sink     audit.Sink
	feats    Features
	t0       time.Time
	uid, gid int          // inside, and (as root, without a range) on the host
	lease    *idmap.Lease // the host id range, or nil (ids 1:1)
	rootCaps bool         // root inside keeps rootCapabilities (keepsRootCaps)
	filter   filterSpec
	mediate  bool
	degraded []string
	env      []string
	lim      cgroupLimits
	guard    *policy.ConfigGuard
}

func (p *prepared) wrap(format string, args ...any) error {
	return fmt.Errorf("create sandbox %q: "+format, append([]any{p.spec.ID}, args...)...)
}

// prepare validates the spec and fails closed on anything the policy
// needs that the host lacks. It changes nothing on the host.
func (b *Backend) prepare(spec sandbox.Spec) (*prepared, error) {
	if !sandbox.ValidID(spec.ID) {
		return nil, fmt.Errorf("create sandbox %q: invalid id: %w", spec.ID, sandbox.ErrInvalid)
	}
	p := &prepared{spec: spec, pol: spec.Policy, feats: b.features(), t0: time.Now()}
	if p.pol == nil {
		return nil, p.wrap("nil policy: %w", sandbox.ErrInvalid)
	}
	var err error
	if p.pol, err = imageroot.Policy(spec); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.log = spec.Log
	if p.log == nil {
		p.log = b.log
	}
	p.log = p.log.With("sandbox", spec.ID)
	p.sink = spec.Audit
	if p.sink == nil {
		p.sink = audit.Discard
	}
	if err := p.checkHost(); err != nil {
		return nil, err
	}
	if p.uid, p.gid, err = p.pol.Process.Credentials(os.Getuid(), os.Getgid()); err != nil {
		return nil, p.wrap("%w", err)
	}
	if b.cfg.HostIDs != nil && (p.uid >= idmap.Size || p.gid >= idmap.Size) {
		return nil, p.wrap("uid/gid %d/%d: a sandbox with a host id range has ids 0..%d: %w", p.uid, p.gid, idmap.Size-1, sandbox.ErrInvalid)
	}
	if err := p.makeGuard(); err != nil {
		return nil, err
	}
	p.env = sandbox.Environ(p.pol, os.Environ(), spec.Env)
	p.lim = cgroupLimits{Memory: int64(p.pol.Limits.Memory), Pids: p.pol.Limits.Pids, CPUs: p.pol.Limits.CPUs}
	return p, nil
}

// checkHost fails closed on what the policy needs and the host lacks
// (or, with allow_degraded, records it) and builds the seccomp filter.
func (p *prepared) checkHost() error {
	feats := p.feats
	need := func(ok bool, what string) error {
		if ok {
			return nil
		}
		if !p.pol.AllowDegraded {
			return p.wrap("%s: %w", what, sandbox.ErrUnavailable)
		}
		p.degraded = append(p.degraded, what)
		return nil
	}
	if !feats.UserNamespaces {
		return p.wrap("user namespaces not available (%s): %w", feats.UserNamespacesReason, sandbox.ErrUnavailable)
	}
	if err := need(feats.LandlockABI > 0, "landlock not supported by this kernel"); err != nil {
		return err
	}
	useSeccomp := feats.Seccomp && feats.SeccompArch
	if err := need(useSeccomp, "seccomp filter not available on this host"); err != nil {
		return err
	}
	// Writes to host-backed paths go through the host's mediator, which
	// enforces protected config, pinned files and set-id bits at every
	// depth; without it (kernel < 5.14) they cannot be enforced.
	if writesHost(p.pol, p.spec.Caches) {
		p.mediate = useSeccomp && feats.SeccompAddFD && feats.LandlockABI > 0
		if err := need(p.mediate, "write mediation for the workspace (seccomp user notification with ADDFD, Linux 5.14+): without it protected config, pinned files and set-id bits cannot be enforced"); err != nil {
			return err
		}
	}
	if useSeccomp {
		var err error
		if p.filter, err = buildFilter(feats.SeccompUserNotif, p.mediate); err != nil {
			return p.wrap("%v: %w", err, sandbox.ErrUnavailable)
		}
	}
	return nil
}

// makeGuard builds the config guard: the policy's protected config and
// pinned files, the spec's, and the airlock binary. Without write
// mediation a pinned file in a writable path is refused.
func (p *prepared) makeGuard() error {
	p.guard = p.pol.ConfigGuard(p.pol.Process.Env["HOME"])
	for k, v := range p.spec.Pinned {
		p.guard.Pinned[k] = v
	}
	if exe, err := os.Executable(); err == nil {
		p.guard.Pinned[exe] = "the airlock binary"
	}
	// The mediator sees the workspace where the sandbox does.
	p.guard.Relocate(p.pol.Filesystem.WorkspacePath(), p.pol.Filesystem.WorkspaceInside())
	if !p.mediate {
		// Nothing can keep a writable path from rewriting a pinned file:
		// refuse to start rather than let the sandbox edit its own policy.
		for path, what := range p.guard.Pinned {
			if w := writablePath(p.pol, p.spec.Caches, path); w != "" {
				return p.wrap("%s %s is inside the writable path %s and this host cannot protect it (no write mediation): move it out, or make %s read-only: %w", what, path, w, w, sandbox.ErrUnavailable)
			}
		}
	}
	return nil
}

// writesHost reports whether the sandbox gets a host-backed writable path.
func writesHost(pol *policy.Policy, caches []sandbox.Bind) bool {
	return pol.Filesystem.WorkspacePath() != "" || len(pol.Filesystem.ReadWrite) > 0 || len(caches) > 0
}

// writablePath returns the writable host path holding path, or "".
func writablePath(pol *policy.Policy, caches []sandbox.Bind, path string) string {
	roots := append([]string{pol.Filesystem.WorkspacePath()}, pol.Filesystem.ReadWrite...)
	for _, c := range caches {
		roots = append(roots, c.Src)
	}
	for _, r := range roots {
		if r != "" && hostfs.Under(path, []string{r}) {
			return r
		}
	}
	return ""
}

// started is the init process and what connects the host to it.
type started struct {
	cmd      *exec.Cmd
	waited   chan struct{} // closed once the init is reaped
	waitErr  error
	cg       *sandboxCgroup
	memfd    *os.File
	ctlHost  *net.UnixConn
	ctlInit  *os.File
	chHost   *net.UnixConn
	chInit   *os.File
	stderr   *boundedBuffer
	lock     *os.File
	writable *imageroot.Writable // an image sandbox's writable layer
	// keepWritable: the caller's layer (Spec.Root.Writable), left alone.
	keepWritable bool
	overlay      *os.File   // the image root made by the host (root callers), for the init
	mapped       []*os.File // idmapped layers, writable layer last (mapOverlay), for the init
	sealed       chan error // sealMemfdExec's result, when the host writes the sysctl
	tCgroup      time.Time
	tForked      time.Time
	tPrepare     time.Time
}

// ownWritable is the writable layer the sandbox removes at its end (nil
// when the caller keeps it).
func (st *started) ownWritable() *imageroot.Writable {
	if st.keepWritable {
		return nil
	}
	return st.writable
}

// closeChildEnds closes the descriptors only the init needed.
func (st *started) closeChildEnds() {
	closeAll(st.mapped)
	if st.overlay != nil {
		st.overlay.Close()
	}
	st.memfd.Close()
	st.ctlInit.Close()
	st.chInit.Close()
}

// spawn makes the cgroup2 directory (the init is born in it) and starts
// the init, which waits for the host's "go" before touching anything.
func (b *Backend) spawn(p *prepared, direct *directIO, undo *undo.Stack) (*started, error) {
	st := &started{waited: make(chan struct{}), stderr: &boundedBuffer{max: 8 << 10}}
	lock, err := b.lockState(p.spec.ID)
	if err != nil {
		return nil, fmt.Errorf("state: %v: %w", err, sandbox.ErrUnavailable)
	}
	st.lock = lock
	undo.Push(func() { b.unlockState(p.spec.ID, lock) })
	if err := b.imageLayer(p, st, undo); err != nil {
		return nil, err
	}
	st.cg = newCgroupV2(hostCgroups(), b.cfg.CgroupParent, p.spec.ID, p.lim)
	undo.Push(func() { st.cg.kill(); _ = st.cg.remove() })
	st.tCgroup = time.Now()
	if err := st.channels(undo); err != nil {
		return nil, err
	}

	cmd := exec.Command(b.cfg.AgentBinary, InitCommand)
	cmd.Args[0] = "airlock-init"
	// One P: the init is I/O bound, starts faster, and has fewer threads
	// for the all-threads capability drop to stop.
	cmd.Env = []string{"GOMAXPROCS=1"}
	if p.feats.Rootless && p.lease != nil {
		cmd.Env = append(cmd.Env, envIDMap)
	}
	cmd.ExtraFiles = []*os.File{st.memfd, st.ctlInit, st.chInit}
	if st.overlay != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, st.overlay) // fdOverlay
	}
	if direct != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = direct.Stdin, direct.Stdout, direct.Stderr
	} else {
		cmd.Stderr = st.stderr
	}
	cmd.SysProcAttr = sysProcAttr(p.uid, p.gid, p.feats.Rootless, p.lease, st.cg)
	st.tPrepare = time.Now()
	if err := startProcess(cmd); err != nil {
		st.closeChildEnds()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("start init %s: %v: %w", b.cfg.AgentBinary, err, sandbox.ErrUnavailable)
		}
		return nil, fmt.Errorf("start init (namespaces: %s): %v: %w", "user,mount,pid,net,ipc,uts,cgroup", err, sandbox.ErrUnavailable)
	}
	st.tForked = time.Now()
	st.cmd = cmd
	go func() { st.waitErr = cmd.Wait(); close(st.waited) }()
	undo.Push(func() {
		_ = cmd.Process.Kill()
		st.cg.kill()
		<-st.waited
	})
	if p.feats.Rootless && p.lease != nil {
		if err := writeSubIDMaps(cmd.Process.Pid, p.uid, p.gid, p.lease); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// imageLayer gets an image sandbox's writable layer (the caller's, or
// one of its own, removed on undo) and, as root, the overlay the host
// mounts for the init.
func (b *Backend) imageLayer(p *prepared, st *started, undo *undo.Stack) (err error) {
	switch {
	case p.spec.Root != nil && p.spec.Root.Writable != "":
		if st.writable, err = imageroot.Use(p.spec.Root.Writable); err != nil {
			return err
		}
		st.keepWritable = true
	case p.spec.Root != nil:
		// After the lock: a reclaimer never removes a live sandbox's layer.
		// Its upper directory is the root directory the sandbox sees:
		// owned by the sandbox's user, whose init makes its mount points
		// there (phase 2's id mapping gives it to root inside instead).
		owner, group := -1, -1
		if !p.feats.Rootless {
			owner, group = p.uid, p.gid
		}
		if st.writable, err = imageroot.Make(b.cfg.WritableDir, p.spec.ID, owner, group); err != nil {
			return err
		}
		w := st.writable
		undo.Push(func() { _ = w.Remove() })
	}
	if st.writable != nil && !p.feats.Rootless && p.lease == nil {
		// As root, the host makes the overlay (with its credentials: the
		// image's files keep their owners whatever the sandbox's uid)
		// and hands it over detached; rootless, the init mounts it in
		// its own user namespace; with a host id range, the init mounts it
		// in its namespace from layers the host idmaps (mapOverlay).
		if st.overlay, err = imageroot.Detached(p.spec.Root.Layers, st.writable); err != nil {
			return err
		}
		ov := st.overlay
		undo.Push(func() { ov.Close() }) // closing twice is harmless
	}
	return nil
}

// channels makes the init's config file and the control and channel
// socket pairs; the host ends close on undo.
func (st *started) channels(undo *undo.Stack) error {
	var err error
	if st.memfd, err = emptyConfigFile(); err != nil {
		return fmt.Errorf("init config: %v: %w", err, sandbox.ErrUnavailable)
	}
	if st.ctlHost, st.ctlInit, err = socketpair(unix.SOCK_SEQPACKET); err != nil {
		st.memfd.Close()
		return fmt.Errorf("control socket: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo.Push(func() { st.ctlHost.Close() })
	if st.chHost, st.chInit, err = socketpair(unix.SOCK_STREAM); err != nil {
		st.memfd.Close()
		st.ctlInit.Close()
		return fmt.Errorf("channel: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo.Push(func() { st.chHost.Close() })
	return nil
}

// configure writes the init's configuration (mount plan, Landlock,
// seccomp, limits) while its runtime starts, and puts it in the v1
// cgroups with the limits written.
func (b *Backend) configure(p *prepared, st *started, direct *directIO, undo *undo.Stack) (*fsPlan, error) {
	if p.lease != nil && !p.feats.Rootless {
		// Its init is a range uid: it cannot write the sysctl itself. The
		// host's child runs while the rest is configured (handshake waits).
		st.sealed = make(chan error, 1)
		go func() { st.sealed <- sealMemfdExec(st.cmd.Process.Pid) }()
	}
	plan, err := buildPlan(p.pol, p.spec.Files, p.spec.Caches, !p.feats.Rootless && p.uid == 0 && p.lease == nil, p.mediate)
	if err != nil {
		return nil, err
	}
	rootRule := llRule{Access: llReadDir, Path: "/"}
	var overlay *overlayRoot
	switch {
	case st.writable != nil && p.lease != nil && !p.feats.Rootless:
		if err := mapOverlay(p, st); err != nil {
			return nil, err
		}
		overlay = &overlayRoot{Mapped: len(p.spec.Root.Layers)}
		rootRule.Access = llReadExec
		if err := mappedBinds(p, st, plan); err != nil {
			return nil, err
		}
	case st.overlay != nil:
		overlay = &overlayRoot{FD: true}
		rootRule.Access = llReadExec
	case st.writable != nil:
		dir, opts, err := imageroot.Options(p.spec.Root.Layers, st.writable)
		if err != nil {
			return nil, err
		}
		overlay = &overlayRoot{Chdir: dir, Options: opts}
		rootRule.Access = llReadExec
	}
	cfg := initConfig{
		ID:            p.spec.ID,
		Hostname:      "airlock",
		RootSize:      rootSize(p.spec.Files),
		Overlay:       overlay,
		Mounts:        plan.Mounts,
		Landlock:      append(plan.Landlock, rootRule),
		UseLandlock:   p.feats.LandlockABI > 0,
		Seccomp:       p.filter.Prog,
		SeccompNotify: p.feats.SeccompUserNotif,
		Rlimits:       rlimits(p.pol),
		Workdir:       p.pol.Process.Workdir,
	}
	if p.rootCaps {
		cfg.KeepCaps = rootCapabilities
	}
	// A normal user's sandbox with subordinate ids drops the caller's
	// supplementary groups (newgidmap allowed setgroups): none is mapped,
	// and none should open a host file for it.
	cfg.DropGroups = p.feats.Rootless && p.lease != nil
	if direct != nil {
		cfg.Exec = direct.Args
		cfg.Env = direct.Env
		if cfg.Env == nil {
			cfg.Env = p.env
		}
	}
	if err := json.NewEncoder(st.memfd).Encode(&cfg); err != nil {
		return nil, fmt.Errorf("init config: %v: %w", err, sandbox.ErrUnavailable)
	}
	missing, err := st.cg.finish(hostCgroups(), b.cfg.CgroupParent, p.spec.ID, p.lim)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %v: %w", err, sandbox.ErrUnavailable)
	}
	if len(missing) > 0 && !p.pol.AllowDegraded {
		return nil, fmt.Errorf("%s: %w", missingCgroupError(hostCgroups(), missing), sandbox.ErrUnavailable)
	}
	for _, m := range missing {
		p.degraded = append(p.degraded, m.String())
	}
	if err := st.cg.joinV1(st.cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
	}
	return plan, nil
}

// connect lets the init set up, starts the agent session and the seccomp
// supervisor (with the write mediator), and returns the running sandbox.
func (b *Backend) connect(ctx context.Context, p *prepared, st *started, plan *fsPlan, direct *directIO, undo *undo.Stack) (*nativeSandbox, error) {
	tStart := time.Now()
	// The supervisor's thread is prepared (with the sandbox's credentials
	// for the write mediator) while the init sets up.
	s := &nativeSandbox{
		id: p.spec.ID, b: b, log: p.log, audit: p.sink, cmd: st.cmd, cg: st.cg, lock: st.lock, lease: p.lease, host: hostCreds(p), writable: st.ownWritable(),
		waited: st.waited, done: make(chan struct{}), stderr: st.stderr, denials: newDenials(p.sink, p.spec.ID, p.log),
	}
	var creds *fsguard.Creds
	if p.mediate {
		c := hostCreds(p)
		creds = &c
	}
	sup, err := startSupervisor(creds, s.violation)
	if err != nil {
		return nil, fmt.Errorf("seccomp supervisor: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo.Push(sup.stop)
	hctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		// A setup step that hangs must not hang Create forever.
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, setupTimeout)
		defer cancel()
	}
	helloDone, err := b.sendHello(hctx, p, st, s, direct, undo)
	if err != nil {
		return nil, err
	}
	if st.sealed != nil {
		if err := <-st.sealed; err != nil {
			closeAll(st.mapped)
			return nil, err
		}
	}
	listener, initTiming, err := handshake(hctx, st.ctlHost, st.waited, st.mapped)
	closeAll(st.mapped)
	if err != nil {
		if errors.Is(err, errInitExited) {
			<-st.waited
			msg := st.stderr.String()
			if msg == "" && st.waitErr != nil {
				msg = st.waitErr.Error()
			}
			return nil, fmt.Errorf("init exited during setup: %s: %w", msg, sandbox.ErrUnavailable)
		}
		return nil, err
	}
	st.ctlHost.Close()
	tSetup := time.Now()
	if err := b.superviseFrom(p, st, plan, s, sup, listener); err != nil {
		return nil, err
	}
	tHello := time.Now()
	if err := <-helloDone; err != nil {
		return nil, fmt.Errorf("agent hello: %w", err)
	}
	p.log.Debug("sandbox started", "cgroup2", st.tCgroup.Sub(p.t0), "prepare", st.tPrepare.Sub(p.t0),
		"fork", st.tForked.Sub(st.tPrepare), "configure", tStart.Sub(st.tForked),
		"init_setup", tSetup.Sub(tStart), "supervisor", tHello.Sub(tSetup), "hello", time.Since(tHello), "init_us", initTiming)
	s.running(p, listener >= 0)
	return s, nil
}

// sendHello makes the agent client and sends its Hello, which waits in
// the channel until the init serves it: one fewer host<->init wake-up on
// the start path. The result arrives on the channel.
func (b *Backend) sendHello(ctx context.Context, p *prepared, st *started, s *nativeSandbox, direct *directIO, undo *undo.Stack) (<-chan error, error) {
	done := make(chan error, 1)
	if direct != nil {
		st.chHost.Close()
		done <- nil
		return done, nil
	}
	opts, gc := agent.SessionFor(p.spec, p.pol, p.env, p.log, p.sink)
	client, err := agent.NewClient(st.chHost, opts)
	if err != nil {
		return nil, fmt.Errorf("agent: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo.Push(func() { client.Close() })
	s.client = client
	go func() { done <- client.Hello(ctx, gc) }()
	return done, nil
}

// superviseFrom hands the seccomp listener (if the init sent one) and the
// write mediator to the supervisor.
func (b *Backend) superviseFrom(p *prepared, st *started, plan *fsPlan, s *nativeSandbox, sup *supervisor, listener int) error {
	if listener < 0 {
		sup.stop() // no listener: nothing to supervise
		return nil
	}
	var med *fsguard.Mediator
	if p.mediate {
		var err error
		med, err = fsguard.New(fsguard.Config{
			Pid: st.cmd.Process.Pid, Mounts: plan.Mediated, Private: plan.Private,
			Guard: p.guard, Creds: hostCreds(p), Listener: listener, Report: s.denials.report,
		})
		if err != nil {
			unix.Close(listener)
			return fmt.Errorf("write mediator: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	if err := sup.start(listener, med); err != nil {
		return fmt.Errorf("seccomp supervisor: %v: %w", err, sandbox.ErrUnavailable)
	}
	s.sup = sup
	return nil
}

// running starts watching the sandbox and its wall timeout, and audits
// the start (and every protection waived).
func (s *nativeSandbox) running(p *prepared, notify bool) {
	go s.watch()
	if t := p.pol.Limits.Timeout.D(); t > 0 {
		s.timer.Store(time.AfterFunc(t, s.timeout))
	}
	for _, d := range p.degraded {
		p.log.Warn("protection waived by allow_degraded", "what", d)
		p.sink.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDegraded, Message: d})
	}
	p.sink.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pid": s.cmd.Process.Pid, "landlock_abi": p.feats.LandlockABI,
		"seccomp_notify": notify, "write_mediation": p.mediate, "cgroup": p.feats.CgroupVersion,
	}})
}

// hostCreds are the host credentials of the sandbox's processes.
func hostCreds(p *prepared) fsguard.Creds {
	if p.feats.Rootless {
		return fsguard.Creds{UID: os.Geteuid(), GID: os.Getegid()}
	}
	if p.lease != nil {
		c := fsguard.Creds{UID: p.lease.UID + p.uid, GID: p.lease.GID + p.gid, Groups: []int{}}
		if p.rootCaps {
			c.Root = &fsguard.Range{UID: p.lease.UID, GID: p.lease.GID, Count: p.lease.Count}
		}
		return c
	}
	return fsguard.Creds{UID: p.uid, GID: p.gid, Groups: []int{}}
}

// mapOverlay idmaps the image's layers and the writable layer through
// the init's user namespace (imageroot.Mapped), for a sandbox with a host
// id range; the init mounts its root from them. Its root then owns the
// image's root files, and nothing it writes is stored as host root.
func mapOverlay(p *prepared, st *started) error {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", st.cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("image root: user namespace of the init: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer ns.Close()
	if len(p.spec.Root.Layers)+1 > maxMapped {
		return fmt.Errorf("image root: %d layers, at most %d with a host id range: %w", len(p.spec.Root.Layers), maxMapped-1, sandbox.ErrLimit)
	}
	st.mapped, err = imageroot.Mapped(append(slices.Clone(p.spec.Root.Layers), st.writable.Dir), ns)
	return err
}

// maxMapped bounds the descriptors one "go" carries (SCM_MAX_FD is 253).
const maxMapped = 250

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

var errInitExited = errors.New("init exited")

// handshake lets the init proceed and reads its status; it returns the
// seccomp listener fd, or -1.
func handshake(ctx context.Context, ctl *net.UnixConn, waited <-chan struct{}, mapped []*os.File) (int, map[string]int64, error) {
	var rights []byte
	if len(mapped) > 0 {
		// The idmapped layers (mapOverlay) ride with the "go".
		fds := make([]int, len(mapped))
		for i, f := range mapped {
			fds[i] = int(f.Fd())
		}
		rights = unix.UnixRights(fds...)
	}
	if _, _, err := ctl.WriteMsgUnix([]byte("go"), rights, nil); err != nil {
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

func sysProcAttr(uid, gid int, rootless bool, lease *idmap.Lease, cg *sandboxCgroup) *syscall.SysProcAttr {
	hostUID, hostGID := uid, gid
	if rootless {
		hostUID, hostGID = os.Geteuid(), os.Getegid()
	}
	uidMap := []syscall.SysProcIDMap{{ContainerID: uid, HostID: hostUID, Size: 1}}
	gidMap := []syscall.SysProcIDMap{{ContainerID: gid, HostID: hostGID, Size: 1}}
	if rootless && lease != nil {
		// newuidmap and newgidmap write them once it runs (subid_linux.go).
		uidMap, gidMap = nil, nil
	} else if lease != nil {
		// Every id inside is an unprivileged host id of the range.
		uidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: lease.UID, Size: lease.Count}}
		gidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: lease.GID, Size: lease.Count}}
	}
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: uidMap,
		GidMappings: gidMap,
		// The init keeps the capabilities it needs for setup across exec
		// even when its uid inside is not 0; it drops all of them itself.
		// CAP_CHOWN: an image's overlay is mounted with the init's
		// credentials, and a copy-up (a mount point under the image's
		// root-owned /etc or /run) gives the copy its owner.
		AmbientCaps: []uintptr{
			unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE,
			unix.CAP_SYS_RESOURCE, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_FOWNER, unix.CAP_CHOWN,
		},
		Pdeathsig: syscall.SIGKILL,
		Setsid:    true,
	}
	if rootless && lease != nil {
		// Its maps come after its exec, which made it no root inside: it
		// keeps only what it takes along, so also what root inside may
		// keep (keepCapabilities) beyond the setup's.
		for _, c := range rootCapabilities {
			if !slices.Contains(attr.AmbientCaps, uintptr(c)) {
				attr.AmbientCaps = append(attr.AmbientCaps, uintptr(c))
			}
		}
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
