package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/prep"
	"github.com/airlock-dev/airlock/backend/internal/rootcaps"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Create starts a sandbox. See sandbox.Backend. It runs the stages in
// order — prepare (decide, touch nothing), bundle (the OCI bundle and the
// cgroup), start (runsc run with the agent on its stdio), connect (the
// agent's Hello) — each registering what undoes it.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	p, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	var u undo.Stack
	defer func() {
		if err != nil {
			u.Run()
		}
	}()
	if err := b.makeBundle(p, &u); err != nil {
		return nil, p.wrap("%w", err)
	}
	r, err := b.startRunsc(p, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	s, err := b.connect(ctx, p, r, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	return s, nil
}

// prepared is what Create decided before touching the host.
type prepared struct {
	spec     sandbox.Spec
	pol      *policy.Policy
	log      *slog.Logger
	sink     audit.Sink
	info     Info
	uid, gid int
	lease    *idmap.Lease // host ids, or nil (the caller's)
	rootCaps bool         // root inside keeps rootcaps.Set
	agentBin string
	guard    *policy.ConfigGuard
	t0       time.Time
	// Filled in by makeBundle.
	dir  string
	plan *mountPlan
	cg   *sandboxCgroup
}

func (p *prepared) wrap(format string, args ...any) error {
	return prep.Wrap(p.spec.ID, format, args...)
}

// prepare validates the spec and finds runsc and the agent binary.
func (b *Backend) prepare(ctx context.Context, spec sandbox.Spec) (*prepared, error) {
	if spec.Policy != nil {
		// An image sandbox's policy names its image (imageroot.Policy).
		pol, err := imageroot.Policy(spec)
		if err != nil {
			return nil, prep.Wrap(spec.ID, "%w", err)
		}
		spec.Policy = pol
	}
	c, err := prep.Check(spec, b.cfg.AgentBinary, b.log)
	if err != nil {
		return nil, err
	}
	p := &prepared{spec: spec, pol: c.Policy, uid: c.UID, gid: c.GID, agentBin: c.AgentBin,
		log: c.Log, sink: c.Sink, guard: c.Guard, t0: c.Start}
	if p.info = b.Info(ctx); p.info.Err != nil {
		return nil, p.wrap("%w", p.info.Err)
	}
	return p, nil
}

// makeBundle writes the OCI bundle (mounts, spec, skeleton root) and
// makes the cgroup with its limits.
func (b *Backend) makeBundle(p *prepared, u *undo.Stack) error {
	if err := b.makeBundleDir(p, u); err != nil {
		return err
	}
	dir := p.dir
	plan, err := planMounts(planInput{Policy: p.pol, Rootfs: p.pol.Filesystem.Rootfs, Files: p.spec.Files, Bundle: p.dir, UID: p.uid, GID: p.gid, Guard: p.guard, Unmapped: p.lease != nil})
	if err != nil {
		return err
	}
	for i := range plan.Mounts {
		if plan.Mounts[i].Destination == AgentPath {
			plan.Mounts[i].Source = p.agentBin
		}
	}
	p.plan = plan
	if p.lease != nil {
		// runsc's gofer runs as the range's root: it must reach the
		// bundle (search permission only; its files stay root's unless
		// they are the sandbox's to read).
		for _, d := range []string{b.cfg.StateDir, b.bundleRoot(), p.dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				return fmt.Errorf("bundle: %v: %w", err, sandbox.ErrUnavailable)
			}
		}
	}
	if p.spec.Root != nil {
		if _, err := b.mountImageRoot(p); err != nil {
			return err
		}
		id := p.spec.ID
		u.Push(func() { b.unmountImageRoot(dir, id) }) // before the bundle goes (pushed earlier, run later)
		plan.Image = true
		plan.RuntimeMountPoints = p.lease != nil
	}
	oci := buildSpec(specInput{ID: p.spec.ID, Policy: p.pol, UID: p.uid, GID: p.gid, Mounts: plan.Mounts, Lease: p.lease, RootCaps: p.rootCaps, EnvironPrivate: p.info.environPrivate()})
	oci.Root.Readonly = !plan.Image
	if err := writeBundle(p.dir, oci, plan); err != nil {
		return fmt.Errorf("write bundle: %v: %w", err, sandbox.ErrInvalid)
	}
	if p.lease != nil {
		if err := chownBundle(p.dir, p.lease, plan.Image); err != nil {
			return err
		}
	}
	p.cg = newSandboxCgroup("/" + b.cfg.CgroupParent + "/" + p.spec.ID)
	if err := p.cg.create(p.pol.Limits); err != nil {
		return fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
	}
	cg := p.cg
	u.Push(func() { cg.remove() })
	return nil
}

// makeBundleDir makes the state directories and the sandbox's bundle
// directory (an existing one is ErrExists), removed on undo; with host id
// ranges as root it leases the sandbox's range (released on undo) and
// gives it the workspace.
func (b *Backend) makeBundleDir(p *prepared, u *undo.Stack) error {
	for _, d := range []string{b.runscRoot(), b.bundleRoot()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("state dir: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	p.dir = b.bundleDir(p.spec.ID)
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("bundle %s: %w", p.dir, sandbox.ErrExists)
		}
		return fmt.Errorf("bundle: %v: %w", err, sandbox.ErrUnavailable)
	}
	dir := p.dir
	u.Push(func() { os.RemoveAll(dir) })
	if b.cfg.HostIDs != nil && os.Geteuid() == 0 {
		if p.uid >= idmap.Size || p.gid >= idmap.Size {
			return fmt.Errorf("uid/gid %d/%d: a sandbox with a host id range has ids 0..%d: %w", p.uid, p.gid, idmap.Size-1, sandbox.ErrInvalid)
		}
		var err error
		if p.lease, err = b.cfg.HostIDs.Lease(); err != nil {
			return err
		}
		u.Push(p.lease.Release)
		p.rootCaps = rootcaps.Keep(p.spec.Root != nil, true, p.uid, p.pol)
		if err := hostfs.OwnWorkspace(p.spec, p.lease.UID+p.uid, p.lease.GID+p.gid); err != nil {
			return err
		}
	}
	return nil
}

// chownBundle gives the sandbox's host id range what runsc's gofer, its
// root, opens in the bundle. An image's root is its own already
// (imageroot.MappedOverlay).
func chownBundle(dir string, lease *idmap.Lease, image bool) error {
	// The gofer opens the deny objects to mount them: they are the
	// range root's (mode 000 still: no process inside has a
	// capability to override it).
	for _, n := range []string{bundleDenyDir, bundleDenyFile} {
		if err := os.Lchown(filepath.Join(dir, n), lease.UID, lease.GID); err != nil {
			return fmt.Errorf("bundle: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	if image {
		return nil
	}
	// So is the skeleton root (mount points and links only): the
	// gofer makes the mount points below the sandbox's own mounts.
	err := filepath.WalkDir(filepath.Join(dir, bundleRootfs), func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, lease.UID, lease.GID)
	})
	if err != nil {
		return fmt.Errorf("bundle: %v: %w", err, sandbox.ErrUnavailable)
	}
	return nil
}

// running is `runsc run` with the agent channel on its stdio.
type running struct {
	cmd     *exec.Cmd
	conn    *pipeConn
	waited  chan struct{}
	waitErr error
	stderr  *logtail.Tail
	start   time.Time
}

// startRunsc starts `runsc run` in the cgroup, the overlay on when the
// plan asks for it.
func (b *Backend) startRunsc(p *prepared, u *undo.Stack) (*running, error) {
	conn, childIn, childOut, err := newPipeConn()
	if err != nil {
		return nil, fmt.Errorf("pipes: %v: %w", err, sandbox.ErrUnavailable)
	}
	r := &running{conn: conn, waited: make(chan struct{}), stderr: &logtail.Tail{Max: 8 << 10}}
	args := append(b.globalArgs(p.info.Platform), "--ignore-cgroups")
	if p.plan.Overlay {
		// Writes to every mount stay in a filestore in the bundle (on the
		// host's disk, not in memory) until Sync brings them back.
		ov := filepath.Join(p.dir, "overlay")
		if p.spec.Scratch != "" {
			// On the sandbox's disk quota, with its workspace.
			ov = filepath.Join(p.spec.Scratch, "gvisor-overlay")
		}
		err := os.Mkdir(ov, 0o700)
		if err == nil && p.lease != nil {
			// runsc's sandbox process writes it as the range's root.
			err = os.Chown(ov, p.lease.UID, p.lease.GID)
		}
		if err != nil {
			conn.Close()
			childIn.Close()
			childOut.Close()
			return nil, fmt.Errorf("overlay: %v: %w", err, sandbox.ErrUnavailable)
		}
		args = append(args, "--overlay2=all:"+p.info.overlayDir+ov)
	} else {
		// runsc 2023 and later default to an overlay on the root (root:self):
		// an image's root is its host overlayfs, written through.
		args = append(args, "--overlay2=none")
	}
	args = append(args, "run", "--bundle", p.dir, p.spec.ID)
	r.cmd = exec.Command(p.info.Path, args...)
	r.cmd.Stdin, r.cmd.Stdout = childIn, childOut
	r.cmd.Stderr = &logtail.Lines{Log: p.log, Prefix: "runsc: ", Tail: r.stderr}
	// Own process group: a terminal's ^C goes to airlock, not to runsc.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r.start = time.Now()
	err = startInCgroup(r.cmd, p.cg)
	childIn.Close()
	childOut.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start runsc: %v: %w", err, sandbox.ErrUnavailable)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		close(r.waited)
	}()
	id := p.spec.ID
	u.Push(func() {
		conn.Close()
		b.forceStop(id, r.cmd, r.waited)
	})
	return r, nil
}

// connect speaks Hello to the agent and returns the running sandbox.
func (b *Backend) connect(ctx context.Context, p *prepared, r *running, u *undo.Stack) (*gvSandbox, error) {
	pol, spec := p.pol, p.spec
	opts, gc := agent.SessionFor(spec, pol, sandbox.Environ(pol, os.Environ(), spec.Env), p.log, p.sink)
	// runsc 2023 and later implement clone3, whose namespace flags the
	// OCI profile cannot see, and turn its errno into EPERM: the agent
	// refuses clone3 with ENOSYS itself (libc falls back to clone).
	gc.NoClone3 = true
	client, err := agentbox.Connect(ctx, r.conn, opts, gc, agentbox.Runtime{What: "runsc", Died: r.waited, Left: func() string {
		msg := strings.TrimSpace(r.stderr.String())
		if msg == "" && r.waitErr != nil {
			msg = r.waitErr.Error()
		}
		return msg
	}}, u)
	if err != nil {
		return nil, err
	}
	helloAt := time.Now()
	s := &gvSandbox{
		b: b, cmd: r.cmd, waited: r.waited, cg: p.cg,
		bundle: p.dir, guard: p.guard, uid: p.uid, gid: p.gid, lease: p.lease, started: p.t0, memLimit: pol.Limits.Memory > 0,
		runscVersion: strings.TrimPrefix(p.info.Version, "runsc version "), platform: p.info.Platform,
	}
	s.Session = agentbox.NewSession(spec.ID, client, p.log, p.sink, s.teardown)
	if p.plan.Overlay {
		s.syncRoots, s.syncSkip, s.syncInside = p.plan.OverlayRoots, p.plan.OverlaySkip, p.plan.OverlayInside
	}
	s.SetTimeout(pol.Limits.Timeout.D())
	go s.Watch(s.noteOOM, r.waited)
	p.log.Debug("sandbox started", "prepare", r.start.Sub(p.t0), "runsc_to_hello", helloAt.Sub(r.start), "total", time.Since(p.t0))
	p.sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pid": r.cmd.Process.Pid, "platform": p.info.Platform, "runsc": p.info.Version,
		"start_ms": time.Since(r.start).Milliseconds(),
	}})
	return s, nil
}

// forceStop ends a runsc container whatever state it is in: SIGKILL to
// every process in it, then runsc's own cleanup (which exits `runsc run`),
// then `runsc delete --force` for anything left. It returns once `runsc
// run` has exited.
func (b *Backend) forceStop(id string, cmd *exec.Cmd, waited <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-waited:
	default:
		if _, err := b.runsc(ctx, "kill", "--all", id, "KILL"); err != nil {
			b.log.Debug("runsc kill", "sandbox", id, "err", err)
		}
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	if b.hasState(id) {
		if _, err := b.runsc(ctx, "delete", "--force", id); err != nil {
			b.log.Warn("runsc delete", "sandbox", id, "err", err)
		}
	}
}

// hasState reports whether runsc still holds state for container id.
func (b *Backend) hasState(id string) bool {
	m, _ := filepath.Glob(filepath.Join(b.runscRoot(), id+"_sandbox:*"))
	return len(m) > 0
}

// pipeConn is the agent channel: the host ends of the container's stdin
// and stdout pipes as one stream.
type pipeConn struct {
	r, w *os.File
}

// newPipeConn returns the host side and the child's stdin and stdout ends.
func newPipeConn() (conn *pipeConn, childIn, childOut *os.File, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	return &pipeConn{r: outR, w: inW}, inR, outW, nil
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

var _ io.ReadWriteCloser = (*pipeConn)(nil)
