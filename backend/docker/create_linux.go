package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/prep"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Create starts a sandbox. See sandbox.Backend. It runs the stages in
// order — prepare (decide, touch nothing but the daemon's image list),
// state (the state directory), container (create it and attach to its
// stdio), start (start it, find its cgroup), connect (the agent's Hello) —
// each registering what undoes it.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	p, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.reclaimOnce.Do(func() {
		go func() {
			defer close(b.reclaimed)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b.reclaimExited(ctx)
		}()
	})
	var u undo.Stack
	defer func() {
		if err != nil {
			u.Run()
		}
	}()
	if err := b.leaseIDs(p, &u); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.times = append(p.times, time.Now())
	if err := b.makeState(p, &u); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.times = append(p.times, time.Now())
	if err := b.createContainer(ctx, p, &u); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.times = append(p.times, time.Now())
	if err := b.start(ctx, p); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.times = append(p.times, time.Now())
	s, err := b.connect(ctx, p, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	return s, nil
}

// prepared is what Create decided, and then made.
type prepared struct {
	spec     sandbox.Spec
	pol      *policy.Policy
	log      *slog.Logger
	sink     audit.Sink
	e        *engine
	info     Info
	img      resolved
	uid, gid int          // the container's ids (the lease's, with one)
	lease    *idmap.Lease // the host id range, or nil
	agentBin string
	guard    *policy.ConfigGuard
	t0       time.Time
	times    []time.Time // end of prepare, state, container, start
	// Filled in by the later stages.
	dir  string // state directory
	plan *mountPlan
	cid  string // container ID
	conn *attachConn
	tail *logtail.Tail
	pid  int // the agent's pid on the host
	cg   *containerCgroup
	died chan struct{}          // closed when the container exited
	exit container.WaitResponse // how, once died is closed
}

func (p *prepared) wrap(format string, args ...any) error {
	return prep.Wrap(p.spec.ID, format, args...)
}

// prepare validates the spec, asks the daemon what it offers and resolves
// the image.
func (b *Backend) prepare(ctx context.Context, spec sandbox.Spec) (*prepared, error) {
	c, err := prep.Check(spec, b.cfg.AgentBinary, b.log)
	if err != nil {
		return nil, err
	}
	p := &prepared{spec: spec, pol: c.Policy, uid: c.UID, gid: c.GID, agentBin: c.AgentBin,
		log: c.Log, sink: c.Sink, guard: c.Guard, t0: c.Start}
	if p.pol.Filesystem.Rootfs != "" {
		return nil, p.wrap("filesystem.rootfs %q: the docker backend runs images (Spec.Image), not root directories: %w", p.pol.Filesystem.Rootfs, sandbox.ErrInvalid)
	}
	if p.info = b.Info(ctx); p.info.Err != nil {
		return nil, p.wrap("%w", p.info.Err)
	}
	if p.e, err = b.engine(); err != nil {
		return nil, p.wrap("%w", err)
	}
	if p.img, err = b.resolveImage(ctx, p.e, spec.Image); err != nil {
		return nil, p.wrap("%w", err)
	}
	return p, nil
}

func (b *Backend) stateDir(id string) string { return filepath.Join(b.cfg.StateDir, id) }

// leaseIDs gives the sandbox a range of host ids when the backend has a
// source (a root server): the container runs as the range's ids for the
// policy's (root inside is the range's first uid, a user without
// capabilities on the host), and owns its own workspace.
func (b *Backend) leaseIDs(p *prepared, u *undo.Stack) error {
	if b.cfg.HostIDs == nil || os.Geteuid() != 0 {
		return nil
	}
	if p.uid >= idmap.Size || p.gid >= idmap.Size {
		return fmt.Errorf("uid/gid %d/%d: a sandbox with a host id range has ids 0..%d: %w", p.uid, p.gid, idmap.Size-1, sandbox.ErrInvalid)
	}
	l, err := b.cfg.HostIDs.Lease()
	if err != nil {
		return err
	}
	u.Push(l.Release)
	p.lease = l
	p.uid, p.gid = l.UID+p.uid, l.GID+p.gid
	return hostfs.OwnWorkspace(p.spec, p.uid, p.gid)
}

// makeState plans the mounts and writes what they need into the sandbox's
// state directory: the deny objects, the injected files and the overlay
// layers.
func (b *Backend) makeState(p *prepared, u *undo.Stack) error {
	if err := os.MkdirAll(b.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %v: %w", err, sandbox.ErrUnavailable)
	}
	p.dir = b.stateDir(p.spec.ID)
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("state %s: %w", p.dir, sandbox.ErrExists)
		}
		return fmt.Errorf("state: %v: %w", err, sandbox.ErrUnavailable)
	}
	dir := p.dir
	u.Push(func() { os.RemoveAll(dir) })
	plan, err := planMounts(planInput{
		Policy: p.pol, Host: p.img.Host, Files: p.spec.Files, Cache: p.spec.Caches, State: p.dir,
		Agent: p.agentBin, UID: p.uid, GID: p.gid, Guard: p.guard, Label: b.labels(p.spec.ID),
	})
	if err != nil {
		return err
	}
	p.plan = plan
	if err := os.Mkdir(filepath.Join(dir, stateDenyDir), 0); err != nil {
		return fmt.Errorf("state: %v: %w", err, sandbox.ErrUnavailable)
	}
	if err := os.WriteFile(filepath.Join(dir, stateDenyFile), nil, 0); err != nil {
		return fmt.Errorf("state: %v: %w", err, sandbox.ErrUnavailable)
	}
	if len(plan.Files) > 0 {
		if err := os.Mkdir(filepath.Join(dir, stateFiles), 0o755); err != nil {
			return fmt.Errorf("state: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	for i, f := range plan.Files {
		mode := os.FileMode(f.Mode) & 0o777
		if mode == 0 {
			mode = 0o444
		}
		name := filepath.Join(dir, stateFiles, strconv.Itoa(i))
		if err := os.WriteFile(name, f.Data, mode); err != nil {
			return fmt.Errorf("state: file %s: %v: %w", f.Path, err, sandbox.ErrUnavailable)
		}
		if err := os.Chmod(name, mode); err != nil {
			return fmt.Errorf("state: file %s: %v: %w", f.Path, err, sandbox.ErrUnavailable)
		}
	}
	for i, lower := range plan.Overlays {
		layer := filepath.Join(dir, stateOverlay, strconv.Itoa(i))
		for _, sub := range []string{"upper", "work"} {
			if err := os.MkdirAll(filepath.Join(layer, sub), 0o700); err != nil {
				return fmt.Errorf("state: overlay: %v: %w", err, sandbox.ErrUnavailable)
			}
		}
		if err := likeLower(filepath.Join(layer, "upper"), lower); err != nil {
			return fmt.Errorf("state: overlay: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	return nil
}

// likeLower gives an overlay's upper directory the owner and mode of its
// lower one: the root of the merged view takes the upper's, and the
// sandbox (a leased uid on a root server) must see its own directory.
func likeLower(upper, lower string) error {
	fi, err := os.Stat(lower)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Lchown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	return os.Chmod(upper, fi.Mode().Perm())
}

func (b *Backend) labels(id string) map[string]string {
	return map[string]string{LabelSandbox: id, LabelOwner: b.cfg.Owner, LabelBackend: Name}
}

// containerName is the container's name in the daemon.
func containerName(id string) string { return "airlock-" + id }

// createContainer creates the container (not started) and attaches to its
// stdio, so that nothing the agent writes is missed.
func (b *Backend) createContainer(ctx context.Context, p *prepared, u *undo.Stack) error {
	prof, err := seccompProfile()
	if err != nil {
		return fmt.Errorf("seccomp profile: %v: %w", err, sandbox.ErrUnavailable)
	}
	cfg, hc := containerConfig(p, prof, b.labels(p.spec.ID))
	cid, err := p.e.ContainerCreate(ctx, cfg, hc, containerName(p.spec.ID))
	if err != nil {
		if conflict(err) {
			return fmt.Errorf("container %s: %v: %w", containerName(p.spec.ID), err, sandbox.ErrExists)
		}
		return fmt.Errorf("create container: %v: %w", err, sandbox.ErrUnavailable)
	}
	p.cid = cid
	e, cid := p.e, p.cid
	u.Push(func() { removeContainer(e, cid) })
	hr, err := p.e.ContainerAttach(ctx, p.cid)
	if err != nil {
		return fmt.Errorf("attach: %v: %w", err, sandbox.ErrUnavailable)
	}
	p.tail = &logtail.Tail{Max: 8 << 10}
	p.conn = newAttachConn(hr, p.log, p.tail)
	conn := p.conn
	u.Push(func() { conn.Close() })
	return nil
}

// removeContainer kills and removes a container and its overlay volumes,
// whatever state it is in.
func removeContainer(e *engine, cid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.ContainerRemove(ctx, cid)
	if err != nil && !notFound(err) {
		return fmt.Errorf("remove container %s: %w", cid, err)
	}
	return nil
}

// containerConfig is the container for p: the agent as its init, and
// every protection Docker offers.
func containerConfig(p *prepared, seccompJSON string, labels map[string]string) (*container.Config, *container.HostConfig) {
	l := p.pol.Limits
	cfg := &container.Config{
		Hostname:   "airlock",
		User:       strconv.Itoa(p.uid) + ":" + strconv.Itoa(p.gid),
		Entrypoint: []string{AgentPath, "agent", "serve"},
		Cmd:        []string{},
		// The agent trusts only the Hello config; it drops this too.
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		WorkingDir:   "/",
		OpenStdin:    true,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		// The first attach is ours: when it goes (airlock exited, even by
		// SIGKILL) dockerd closes the container's stdin, the agent sees
		// EOF and exits, and every process in the container with it.
		StdinOnce: true,
		Labels:    labels,
		Image:     p.img.ID,
	}
	cfg.NetworkDisabled = true
	hc := &container.HostConfig{
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true", "seccomp=" + seccompJSON},
		ReadonlyRootfs: true,
		Mounts:         p.plan.Mounts,
		Tmpfs:          p.plan.Tmpfs,
		IpcMode:        "private",
		CgroupnsMode:   "private",
		// The agent channel is the container's stdout: never into a log.
		LogConfig:  container.LogConfig{Type: "none"},
		Init:       new(bool),
		AutoRemove: false,
	}
	hc.Resources = container.Resources{
		Ulimits: []*units.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
	}
	if l.Memory > 0 {
		hc.Memory = int64(l.Memory)
		hc.MemorySwap = int64(l.Memory) // no swap on top
	}
	if l.CPUs > 0 {
		hc.NanoCPUs = int64(l.CPUs * 1e9)
	}
	if l.Pids > 0 {
		n := int64(l.Pids)
		hc.PidsLimit = &n
	}
	if n := l.OpenFiles; n > 0 {
		hc.Ulimits = append(hc.Ulimits, &units.Ulimit{Name: "nofile", Soft: int64(n), Hard: int64(n)})
	}
	if d := int64(l.DiskBytes); d > 0 {
		hc.ShmSize = d
	}
	return cfg, hc
}

// start starts the container and finds its init and cgroup.
func (b *Backend) start(ctx context.Context, p *prepared) error {
	// Wait before start: an init that dies at once is still seen.
	exited, err := p.e.ContainerWait(context.Background(), p.cid)
	if err != nil {
		return fmt.Errorf("wait for the container: %v: %w", err, sandbox.ErrUnavailable)
	}
	p.died = make(chan struct{})
	go func() {
		p.exit = <-exited
		close(p.died)
	}()
	if err := p.e.ContainerStart(ctx, p.cid); err != nil {
		return fmt.Errorf("start container: %s: %w", startError(err), sandbox.ErrUnavailable)
	}
	ins, err := p.e.ContainerInspect(ctx, p.cid)
	if err != nil {
		return fmt.Errorf("inspect container: %v: %w", err, sandbox.ErrUnavailable)
	}
	if ins == nil || ins.Pid <= 0 {
		return fmt.Errorf("container exited at start (%s): %s: %w", stateOf(ins), strings.TrimSpace(p.tail.String()), sandbox.ErrUnavailable)
	}
	p.pid = ins.Pid
	p.cg = findCgroup(p.pid)
	return nil
}

func stateOf(st *containerState) string {
	if st == nil {
		return "no state"
	}
	return fmt.Sprintf("%s, exit %d %s", st.Status, st.ExitCode, st.Error)
}

// startError shortens the runtime's message (it repeats its call chain).
func startError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "error during container init: "); i >= 0 {
		return s[i:]
	}
	return s
}

// connect speaks Hello to the agent and returns the running sandbox.
func (b *Backend) connect(ctx context.Context, p *prepared, u *undo.Stack) (*dockerSandbox, error) {
	pol, spec := p.pol, p.spec
	env := imageEnv(p.img.Env, sandbox.Environ(pol, os.Environ(), spec.Env), spec.Env)
	opts, gc := agent.SessionFor(spec, pol, env, p.log, p.sink)
	client, err := agentbox.Connect(ctx, p.conn, opts, gc, agentbox.Runtime{What: "the container", Died: p.died, Left: func() string {
		return fmt.Sprintf("status %d: %s", p.exit.StatusCode, strings.TrimSpace(p.tail.String()))
	}}, u)
	if err != nil {
		return nil, err
	}
	s := &dockerSandbox{
		b: b, e: p.e, cid: p.cid, conn: p.conn,
		cg: p.cg, state: p.dir, guard: p.guard, uid: p.uid, gid: p.gid, lease: p.lease,
		started: p.t0, memLimit: pol.Limits.Memory > 0,
		overlays: p.plan.Overlays, inside: p.plan.Inside, syncSkip: p.plan.SyncSkip,
	}
	s.Session = agentbox.NewSession(spec.ID, client, p.log, p.sink, s.teardown)
	s.SetTimeout(pol.Limits.Timeout.D())
	go s.Watch(nil, p.died)
	if len(p.times) == 4 {
		p.log.Debug("sandbox started", "prepare", p.times[0].Sub(p.t0), "state", p.times[1].Sub(p.times[0]),
			"create_attach", p.times[2].Sub(p.times[1]), "start", p.times[3].Sub(p.times[2]), "hello", time.Since(p.times[3]),
			"total", time.Since(p.t0))
	}
	p.sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "container": p.cid[:12], "image": p.img.ID, "dockerd": p.info.Version,
		"start_ms": time.Since(p.t0).Milliseconds(),
	}})
	return s, nil
}

// imageEnv layers the sandbox's environment over the image's: the image's
// ENV is the base (its PATH included: the image knows where its programs
// are), the policy's environment wins over it except for a PATH that only
// the host's environment gave (explicit ones, from the caller, still win).
func imageEnv(image, sandboxEnv []string, explicit map[string]string) []string {
	if len(image) == 0 {
		return sandboxEnv
	}
	m := map[string]string{}
	var order []string
	set := func(kv string) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return
		}
		if _, seen := m[k]; !seen {
			order = append(order, k)
		}
		m[k] = v
	}
	for _, kv := range image {
		set(kv)
	}
	imagePath, hasPath := m["PATH"]
	for _, kv := range sandboxEnv {
		set(kv)
	}
	if _, ok := explicit["PATH"]; hasPath && !ok {
		m["PATH"] = imagePath
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}
