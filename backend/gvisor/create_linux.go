package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// egressAddr is where the in-sandbox agent listens for proxy clients; the
// loopback interface exists in gVisor's netstack even with --network=none.
const egressAddr = "127.0.0.1:3128"

// Create starts a sandbox. See sandbox.Backend.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	if !sandbox.ValidID(spec.ID) {
		return nil, fmt.Errorf("create sandbox %q: invalid id: %w", spec.ID, sandbox.ErrInvalid)
	}
	wrap := func(format string, args ...any) error {
		return fmt.Errorf("create sandbox %q: "+format, append([]any{spec.ID}, args...)...)
	}
	if spec.Policy == nil {
		return nil, wrap("nil policy: %w", sandbox.ErrInvalid)
	}
	pol := spec.Policy
	if ws := pol.Filesystem.WorkspacePath(); ws != "" && !filepath.IsAbs(ws) {
		return nil, wrap("workspace %q is not absolute (policy not resolved): %w", ws, sandbox.ErrInvalid)
	}
	uid, gid, err := pol.Process.Credentials(os.Getuid(), os.Getgid())
	if err != nil {
		return nil, wrap("%w", err)
	}
	t0 := time.Now()
	info := b.Info(ctx)
	if info.Err != nil {
		return nil, wrap("%w", info.Err)
	}
	agentBin, err := filepath.EvalSymlinks(b.cfg.AgentBinary)
	if err != nil {
		return nil, wrap("agent binary %s: %v: %w", b.cfg.AgentBinary, err, sandbox.ErrUnavailable)
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

	// Host-side preparation. From here on every step registers its undo.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	for _, d := range []string{b.runscRoot(), b.bundleRoot()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, wrap("state dir: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	dir := b.bundleDir(spec.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, wrap("bundle %s: %w", dir, sandbox.ErrExists)
		}
		return nil, wrap("bundle: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	rootfs := spec.Image
	if rootfs == "" {
		rootfs = pol.Filesystem.Rootfs
	}
	guard := pol.ConfigGuard(pol.Process.Env["HOME"])
	for k, v := range spec.Pinned {
		guard.Pinned[k] = v
	}
	guard.Pinned[agentBin] = "the airlock binary"
	plan, err := planMounts(planInput{Policy: pol, Rootfs: rootfs, Files: spec.Files, Bundle: dir, UID: uid, GID: gid, Guard: guard})
	if err != nil {
		return nil, wrap("%w", err)
	}
	for i := range plan.Mounts {
		if plan.Mounts[i].Destination == AgentPath {
			plan.Mounts[i].Source = agentBin
		}
	}
	cgroup := "/" + b.cfg.CgroupParent + "/" + spec.ID
	oci := buildSpec(specInput{ID: spec.ID, Policy: pol, UID: uid, GID: gid, Mounts: plan.Mounts})
	if err := writeBundle(dir, oci, plan); err != nil {
		return nil, wrap("write bundle: %v: %w", err, sandbox.ErrInvalid)
	}
	env := sandbox.Environ(pol, os.Environ(), spec.Env)
	cg := newSandboxCgroup(cgroup)
	if err := cg.create(pol.Limits); err != nil {
		return nil, wrap("%v: %w", err, sandbox.ErrUnavailable)
	}
	undo = append(undo, func() { cg.remove() })

	// Start runsc with the agent channel on the container's stdio.
	conn, childIn, childOut, err := newPipeConn()
	if err != nil {
		return nil, wrap("pipes: %v: %w", err, sandbox.ErrUnavailable)
	}
	stderr := &tailBuffer{max: 8 << 10}
	args := append(b.globalArgs(info.Platform), "--ignore-cgroups")
	if plan.Overlay {
		// Writes to every mount stay in a filestore in the bundle (on the
		// host's disk, not in memory) until Sync brings them back.
		ov := filepath.Join(dir, "overlay")
		if err := os.Mkdir(ov, 0o700); err != nil {
			return nil, wrap("overlay: %v: %w", err, sandbox.ErrUnavailable)
		}
		args = append(args, "--overlay2=all:"+ov)
	}
	args = append(args, "run", "--bundle", dir, spec.ID)
	cmd := exec.Command(info.Path, args...)
	cmd.Stdin, cmd.Stdout = childIn, childOut
	cmd.Stderr = &logWriter{log: log, tail: stderr}
	// Own process group: a terminal's ^C goes to airlock, not to runsc.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := startInCgroup(cmd, cg); err != nil {
		conn.Close()
		childIn.Close()
		childOut.Close()
		return nil, wrap("start runsc: %v: %w", err, sandbox.ErrUnavailable)
	}
	childIn.Close()
	childOut.Close()
	waited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(waited)
	}()
	undo = append(undo, func() {
		conn.Close()
		b.forceStop(spec.ID, cmd, waited)
	})

	guestEgress := ""
	if pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone && spec.Egress != nil {
		guestEgress = egressAddr
	}
	client, err := agent.NewClient(conn, agent.ClientOptions{
		SandboxID: spec.ID, Log: log, Audit: sink, Egress: spec.Egress,
		OutputLimit: int64(pol.Limits.OutputBytes),
	})
	if err != nil {
		return nil, wrap("agent: %v: %w", err, sandbox.ErrUnavailable)
	}
	undo = append(undo, func() { client.Close() })
	helloErr := make(chan error, 1)
	go func() {
		helloErr <- client.Hello(ctx, agent.GuestConfig{Env: env, Workdir: pol.Process.Workdir, UID: -1, GID: -1, EgressAddr: guestEgress})
	}()
	select {
	case err = <-helloErr:
	case <-waited:
		err = errors.New("runsc exited")
	}
	if err != nil {
		select {
		case <-waited:
			msg := strings.TrimSpace(stderr.String())
			if msg == "" && waitErr != nil {
				msg = waitErr.Error()
			}
			return nil, wrap("runsc exited during start: %s: %w", msg, sandbox.ErrUnavailable)
		default:
		}
		if ctx.Err() != nil {
			return nil, wrap("agent hello: %w", errors.Join(ctx.Err(), sandbox.ErrTimeout))
		}
		return nil, wrap("agent hello: %w", err)
	}
	helloAt := time.Now()

	s := &gvSandbox{
		id: spec.ID, b: b, log: log, audit: sink, cmd: cmd, waited: waited, client: client, cg: cg,
		bundle: dir, guard: guard, uid: uid, gid: gid, started: t0, memLimit: pol.Limits.Memory > 0, done: make(chan struct{}),
	}
	if plan.Overlay {
		s.syncRoots, s.syncSkip = plan.OverlayRoots, plan.OverlaySkip
	}
	go s.watch()
	log.Debug("sandbox started", "prepare", start.Sub(t0), "runsc_to_hello", helloAt.Sub(start), "total", time.Since(t0))
	if t := pol.Limits.Timeout.D(); t > 0 {
		s.timer = time.AfterFunc(t, s.timeout)
	}

	sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pid": cmd.Process.Pid, "platform": info.Platform, "runsc": info.Version,
		"start_ms": time.Since(start).Milliseconds(),
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
