package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// egressAddr is where the in-sandbox agent listens for proxy clients; the
// loopback interface exists in gVisor's netstack even with --network=none.
const egressAddr = "127.0.0.1:3128"

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
	agentBin string
	guard    *policy.ConfigGuard
	t0       time.Time
	// Filled in by makeBundle.
	dir  string
	plan *mountPlan
	cg   *sandboxCgroup
}

func (p *prepared) wrap(format string, args ...any) error {
	return fmt.Errorf("create sandbox %q: "+format, append([]any{p.spec.ID}, args...)...)
}

// prepare validates the spec and finds runsc and the agent binary.
func (b *Backend) prepare(ctx context.Context, spec sandbox.Spec) (*prepared, error) {
	p := &prepared{spec: spec, pol: spec.Policy, t0: time.Now()}
	if !sandbox.ValidID(spec.ID) {
		return nil, p.wrap("invalid id: %w", sandbox.ErrInvalid)
	}
	if p.pol == nil {
		return nil, p.wrap("nil policy: %w", sandbox.ErrInvalid)
	}
	var err error
	if p.pol, err = imageroot.Policy(spec); err != nil {
		return nil, p.wrap("%w", err)
	}
	if ws := p.pol.Filesystem.WorkspacePath(); ws != "" && !filepath.IsAbs(ws) {
		return nil, p.wrap("workspace %q is not absolute (policy not resolved): %w", ws, sandbox.ErrInvalid)
	}
	if p.uid, p.gid, err = p.pol.Process.Credentials(os.Getuid(), os.Getgid()); err != nil {
		return nil, p.wrap("%w", err)
	}
	if p.info = b.Info(ctx); p.info.Err != nil {
		return nil, p.wrap("%w", p.info.Err)
	}
	if p.agentBin, err = filepath.EvalSymlinks(b.cfg.AgentBinary); err != nil {
		return nil, p.wrap("agent binary %s: %v: %w", b.cfg.AgentBinary, err, sandbox.ErrUnavailable)
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
	p.guard = p.pol.ConfigGuard(p.pol.Process.Env["HOME"])
	for k, v := range spec.Pinned {
		p.guard.Pinned[k] = v
	}
	p.guard.Pinned[p.agentBin] = "the airlock binary"
	return p, nil
}

// makeBundle writes the OCI bundle (mounts, spec, skeleton root) and
// makes the cgroup with its limits.
func (b *Backend) makeBundle(p *prepared, u *undo.Stack) error {
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
	plan, err := planMounts(planInput{Policy: p.pol, Rootfs: p.pol.Filesystem.Rootfs, Files: p.spec.Files, Bundle: p.dir, UID: p.uid, GID: p.gid, Guard: p.guard})
	if err != nil {
		return err
	}
	for i := range plan.Mounts {
		if plan.Mounts[i].Destination == AgentPath {
			plan.Mounts[i].Source = p.agentBin
		}
	}
	p.plan = plan
	if p.spec.Root != nil {
		if _, err := b.mountImageRoot(p); err != nil {
			return err
		}
		id := p.spec.ID
		u.Push(func() { b.unmountImageRoot(dir, id) }) // before the bundle goes (pushed earlier, run later)
		plan.Image = true
	}
	oci := buildSpec(specInput{ID: p.spec.ID, Policy: p.pol, UID: p.uid, GID: p.gid, Mounts: plan.Mounts})
	oci.Root.Readonly = !plan.Image
	if err := writeBundle(p.dir, oci, plan); err != nil {
		return fmt.Errorf("write bundle: %v: %w", err, sandbox.ErrInvalid)
	}
	p.cg = newSandboxCgroup("/" + b.cfg.CgroupParent + "/" + p.spec.ID)
	if err := p.cg.create(p.pol.Limits); err != nil {
		return fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
	}
	cg := p.cg
	u.Push(func() { cg.remove() })
	return nil
}

// running is `runsc run` with the agent channel on its stdio.
type running struct {
	cmd     *exec.Cmd
	conn    *pipeConn
	waited  chan struct{}
	waitErr error
	stderr  *tailBuffer
	start   time.Time
}

// startRunsc starts `runsc run` in the cgroup, the overlay on when the
// plan asks for it.
func (b *Backend) startRunsc(p *prepared, u *undo.Stack) (*running, error) {
	conn, childIn, childOut, err := newPipeConn()
	if err != nil {
		return nil, fmt.Errorf("pipes: %v: %w", err, sandbox.ErrUnavailable)
	}
	r := &running{conn: conn, waited: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	args := append(b.globalArgs(p.info.Platform), "--ignore-cgroups")
	if p.plan.Overlay {
		// Writes to every mount stay in a filestore in the bundle (on the
		// host's disk, not in memory) until Sync brings them back.
		ov := filepath.Join(p.dir, "overlay")
		if err := os.Mkdir(ov, 0o700); err != nil {
			conn.Close()
			childIn.Close()
			childOut.Close()
			return nil, fmt.Errorf("overlay: %v: %w", err, sandbox.ErrUnavailable)
		}
		args = append(args, "--overlay2=all:"+ov)
	}
	args = append(args, "run", "--bundle", p.dir, p.spec.ID)
	r.cmd = exec.Command(p.info.Path, args...)
	r.cmd.Stdin, r.cmd.Stdout = childIn, childOut
	r.cmd.Stderr = &logWriter{log: p.log, tail: r.stderr}
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
	guestEgress := ""
	if pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone && spec.Egress != nil {
		guestEgress = egressAddr
	}
	client, err := agent.NewClient(r.conn, agent.ClientOptions{
		SandboxID: spec.ID, Log: p.log, Audit: p.sink, Egress: spec.Egress,
		OutputLimit: int64(pol.Limits.OutputBytes),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %v: %w", err, sandbox.ErrUnavailable)
	}
	u.Push(func() { client.Close() })
	env := sandbox.Environ(pol, os.Environ(), spec.Env)
	helloErr := make(chan error, 1)
	go func() {
		helloErr <- client.Hello(ctx, agent.GuestConfig{Env: env, Workdir: pol.Process.Workdir, UID: -1, GID: -1, EgressAddr: guestEgress})
	}()
	select {
	case err = <-helloErr:
	case <-r.waited:
		err = errors.New("runsc exited")
	}
	if err != nil {
		select {
		case <-r.waited:
			msg := strings.TrimSpace(r.stderr.String())
			if msg == "" && r.waitErr != nil {
				msg = r.waitErr.Error()
			}
			return nil, fmt.Errorf("runsc exited during start: %s: %w", msg, sandbox.ErrUnavailable)
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("agent hello: %w", errors.Join(ctx.Err(), sandbox.ErrTimeout))
		}
		return nil, fmt.Errorf("agent hello: %w", err)
	}
	helloAt := time.Now()
	s := &gvSandbox{
		id: spec.ID, b: b, log: p.log, audit: p.sink, cmd: r.cmd, waited: r.waited, client: client, cg: p.cg,
		bundle: p.dir, guard: p.guard, uid: p.uid, gid: p.gid, started: p.t0, memLimit: pol.Limits.Memory > 0, done: make(chan struct{}),
	}
	if p.plan.Overlay {
		s.syncRoots, s.syncSkip, s.syncInside = p.plan.OverlayRoots, p.plan.OverlaySkip, p.plan.OverlayInside
	}
	if t := pol.Limits.Timeout.D(); t > 0 {
		s.timer.Store(time.AfterFunc(t, s.timeout))
	}
	go s.watch()
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

// logWriter sends runsc's stderr to the log line by line and keeps its tail
// for error messages.
type logWriter struct {
	log  interface{ Warn(string, ...any) }
	tail *tailBuffer
	mu   sync.Mutex
	line []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.tail.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, b...)
	for {
		i := strings.IndexByte(string(w.line), '\n')
		if i < 0 {
			break
		}
		w.log.Warn("runsc: " + string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	if len(w.line) > 4096 {
		w.line = w.line[:0]
	}
	return len(b), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

var _ io.ReadWriteCloser = (*pipeConn)(nil)
