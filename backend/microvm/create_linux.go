package microvm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/agentbox"
	"github.com/airlock-dev/airlock/backend/internal/prep"
	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/backend/microvm/guest"
	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// egressAddr is where the guest's agent listens for proxy clients (the
// guest's loopback; the VM has no other network).
const egressAddr = "127.0.0.1:3128"

// guestReserveMiB is guest RAM beyond the policy's memory limit: the guest
// kernel, the initramfs (the agent binary) and page cache. The limit
// itself is the sandbox processes' cgroup inside.
const guestReserveMiB = 192

// vmmOverhead is host memory the VMM may use beyond guest RAM (QEMU
// itself, TCG's translation cache).
const vmmOverhead = 1536 << 20

// Create starts a sandbox. See sandbox.Backend. Stages: prepare (decide,
// touch nothing), start (state dir, cgroup, the VMM restored from a
// template of the same size when there is one, else booted), connect (boot
// config, the agent's Hello); each registers what undoes it.
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
	tmpl := b.template(ctx, p.layout, p.log)
	vm, err := b.start(ctx, p, tmpl, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	s, err := b.connect(ctx, p, vm, tmpl != nil, &u)
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	return s, nil
}

// layout is what a template must share with the VMs restored from it.
type layout struct {
	MemMiB int
	VCPUs  int
	KVM    bool
}

func (l layout) key() string {
	return fmt.Sprintf("m%d-c%d-kvm%t", l.MemMiB, l.VCPUs, l.KVM)
}

// prepared is what Create decided before touching the host.
type prepared struct {
	spec     sandbox.Spec
	pol      *policy.Policy
	log      *slog.Logger
	sink     audit.Sink
	info     Info
	uid, gid int
	guard    *policy.ConfigGuard
	plan     *vmPlan
	layout   layout
	t0       time.Time
	// Filled in by start.
	dir string
	cg  *vmCgroup
}

func (p *prepared) wrap(format string, args ...any) error {
	return prep.Wrap(p.spec.ID, format, args...)
}

// prepare runs the shared checks (backend/internal/prep), finds the VMM
// and kernel, and plans the VM.
func (b *Backend) prepare(ctx context.Context, spec sandbox.Spec) (*prepared, error) {
	c, err := prep.Check(spec, b.cfg.AgentBinary, b.log)
	if err != nil {
		return nil, err
	}
	p := &prepared{spec: spec, pol: c.Policy, uid: c.UID, gid: c.GID, log: c.Log, sink: c.Sink, guard: c.Guard, t0: c.Start}
	if p.info = b.Info(ctx); p.info.Err != nil {
		return nil, p.wrap("%w", p.info.Err)
	}
	// An image comes from the image store as its layers (Spec.Root); a
	// directory is the policy's rootfs.
	if err := imageroot.Check(spec); err != nil {
		return nil, p.wrap("%w", err)
	}
	p.plan, err = planVM(planInput{Policy: p.pol, Layers: rootLayers(spec), Files: spec.Files, Caches: spec.Caches, UID: p.uid, GID: p.gid, Guard: p.guard})
	if err != nil {
		return nil, p.wrap("%w", err)
	}
	p.layout = vmLayout(p.pol.Limits, p.info.Accel == AccelKVM)
	if lim := int64(p.pol.Limits.Memory); lim > 0 {
		p.plan.Boot.MemoryMax = lim
	}
	p.plan.Boot.Hostname = spec.ID
	p.plan.Boot.Loopback = true
	return p, nil
}

// vmLayout sizes the VM: RAM is the memory limit plus the guest's own
// reserve (default 1 GiB when unlimited), vCPUs the CPU limit rounded up
// (at most the host's).
func vmLayout(l policy.Limits, kvm bool) layout {
	mem := 1024
	if l.Memory > 0 {
		mem = int((int64(l.Memory) + 1<<20 - 1) >> 20)
	}
	cpus := 1
	if l.CPUs > 0 {
		cpus = int(math.Ceil(l.CPUs))
	}
	return layout{MemMiB: mem + guestReserveMiB, VCPUs: min(cpus, hostCPUs()), KVM: kvm}
}

func (b *Backend) vmsDir() string { return filepath.Join(b.cfg.StateDir, "vms") }

// emptyDir is the directory unused share devices export.
func (b *Backend) emptyDir() string { return filepath.Join(b.cfg.StateDir, "empty") }

// padShares fills the share list up to MaxShares devices.
func (b *Backend) padShares(s []Share) []Share {
	out := append([]Share{}, s...)
	for i := len(out); i < bootproto.MaxShares; i++ {
		out = append(out, Share{Tag: fmt.Sprintf("share%d", i), Path: b.emptyDir(), ReadOnly: true, Unused: true})
	}
	return out
}

// driver is the VMM driver info chose. Firecracker's is reached only when
// a later phase lets Info accept it (see Info: it cannot share directories).
func (b *Backend) driver(info Info) VMM {
	if info.VMM == VMMFirecracker {
		return &fcDriver{bin: info.Firecracker, agent: b.cfg.AgentBinary}
	}
	return &qemuDriver{bin: info.QEMU, agent: b.cfg.AgentBinary, ids: b.vmmIDs}
}

// start makes the VM's directory and cgroup and starts the VMM.
func (b *Backend) start(ctx context.Context, p *prepared, tmpl *Template, u *undo.Stack) (VM, error) {
	for _, d := range []string{b.vmsDir(), b.emptyDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state dir: %v: %w", err, sandbox.ErrUnavailable)
		}
	}
	os.Chmod(b.emptyDir(), 0o555)
	p.dir = filepath.Join(b.vmsDir(), p.spec.ID)
	if err := os.Mkdir(p.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("vm directory %s: %w", p.dir, sandbox.ErrExists)
		}
		return nil, fmt.Errorf("vm directory: %v: %w", err, sandbox.ErrUnavailable)
	}
	dir := p.dir
	u.Push(func() { os.RemoveAll(dir) })
	initrd, err := b.initramfs(p.info.kernel)
	if err != nil {
		return nil, err
	}
	p.cg = newVMCgroup(b.cfg.CgroupParent + "/" + p.spec.ID)
	if err := p.cg.create(int64(p.layout.MemMiB)<<20+vmmOverhead, p.pol.Limits.CPUs); err != nil {
		return nil, fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
	}
	cg := p.cg
	u.Push(func() { cg.remove() })
	m := &Machine{
		ID: p.spec.ID, Dir: p.dir, Kernel: p.info.kernel.Vmlinux, Initrd: initrd,
		Cmdline: kernelCmdline(p.layout.KVM), VCPUs: p.layout.VCPUs, MemoryMiB: p.layout.MemMiB, KVM: p.layout.KVM,
		Shares: b.padShares(p.plan.Shares), Cgroups: p.cg.dirs(), Deny: p.plan.HostDeny,
	}
	if tmpl != nil {
		m.MemFile, m.Incoming = tmpl.MemFile, tmpl.StateFile
	}
	vm, err := b.driver(p.info).Start(ctx, m)
	if err != nil {
		return nil, err
	}
	u.Push(vm.Kill)
	if tmpl != nil {
		if err := vm.Resume(ctx); err != nil {
			return nil, fmt.Errorf("restore from template: %v: %s: %w", err, lastLines(vm.Output(), 3), sandbox.ErrUnavailable)
		}
	}
	return vm, nil
}

// handshake runs the boot exchange on the agent channel: wait for the
// init's ready byte (a cold boot; a restored VM already sent it), send
// cfg with the clock and fresh entropy, read the answer.
func handshake(conn net.Conn, cold bool, cfg *bootproto.Config) error {
	if cold {
		var r [1]byte
		if _, err := io.ReadFull(conn, r[:]); err != nil {
			return fmt.Errorf("guest init: %w", err)
		}
		if r[0] != bootproto.Ready {
			return fmt.Errorf("guest init: unexpected byte %#x", r[0])
		}
	}
	c := *cfg
	c.TimeNanos = time.Now().UnixNano()
	c.Seed = make([]byte, 64)
	rand.Read(c.Seed)
	if err := bootproto.WriteConfig(conn, &c); err != nil {
		return fmt.Errorf("boot config: %w", err)
	}
	return bootproto.ReadAnswer(conn)
}

var probeConfig = bootproto.Config{Probe: true}

// connect runs the boot exchange, then the agent's Hello.
func (b *Backend) connect(ctx context.Context, p *prepared, vm VM, restored bool, u *undo.Stack) (*vmSandbox, error) {
	pol, spec := p.pol, p.spec
	conn, err := vm.Channel(ctx)
	if err != nil {
		return nil, err
	}
	u.Push(func() { conn.Close() })
	hs := make(chan error, 1)
	go func() { hs <- handshake(conn, !restored, &p.plan.Boot) }()
	select {
	case err = <-hs:
	case <-vm.Done():
		err = errors.New("the VM exited")
	case <-ctx.Done():
		conn.Close()
		err = errors.Join(ctx.Err(), sandbox.ErrTimeout)
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrTimeout) {
			return nil, fmt.Errorf("boot: %w", err)
		}
		return nil, fmt.Errorf("boot: %v: %s: %w", err, lastLines(vm.Output(), 4), sandbox.ErrUnavailable)
	}
	bootAt := time.Now()
	guestEgress := ""
	if pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone && spec.Egress != nil {
		guestEgress = egressAddr
	}
	opts, gc := agent.SessionFor(spec, pol, sandbox.Environ(pol, os.Environ(), spec.Env), p.log, p.sink)
	gc.UID, gc.GID, gc.EgressAddr = p.uid, p.gid, guestEgress
	client, err := agentbox.Connect(ctx, conn, opts, gc, agentbox.Runtime{What: "the VM", Died: vm.Done(),
		Left: func() string { return lastLines(vm.Output(), 3) }}, u)
	if err != nil {
		return nil, err
	}
	s := &vmSandbox{
		b: b, vm: vm, cg: p.cg, dir: p.dir,
		guard: p.guard, uid: p.uid, gid: p.gid, started: p.t0,
		layout: p.layout, restored: restored,
	}
	s.Session = agentbox.NewSession(spec.ID, client, p.log, p.sink, s.teardown)
	if p.plan.Overlay {
		s.syncRoots, s.syncSkip, s.syncLayers = p.plan.OverlayRoots, p.plan.OverlaySkip, p.plan.OverlayLayers
		s.syncInside = p.plan.OverlayInside
	}
	s.SetTimeout(pol.Limits.Timeout.D())
	go s.Watch(nil, vm.Done())
	p.log.Debug("sandbox started", "restored", restored, "boot", bootAt.Sub(p.t0), "total", time.Since(p.t0))
	p.sink.Emit(audit.Event{Sandbox: spec.ID, Type: audit.TypeStart, Fields: map[string]any{
		"backend": Name, "pid": vm.Pid(), "vmm": p.info.VMM, "accel": p.info.Accel, "restored": restored,
		"start_ms": time.Since(p.t0).Milliseconds(),
	}})
	return s, nil
}

// initramfs builds (once per agent binary and kernel) the guest's
// initramfs in the state dir and returns its path.
func (b *Backend) initramfs(k kernelFiles) (string, error) {
	b.initrdMu.Lock()
	defer b.initrdMu.Unlock()
	if b.initrd != "" {
		if _, err := os.Stat(b.initrd); err == nil {
			return b.initrd, nil
		}
	}
	bin, err := filepath.EvalSymlinks(b.cfg.AgentBinary)
	if err != nil {
		return "", fmt.Errorf("agent binary %s: %v: %w", b.cfg.AgentBinary, err, sandbox.ErrUnavailable)
	}
	if ef, err := elf.Open(bin); err != nil {
		return "", fmt.Errorf("agent binary %s: %v: %w", bin, err, sandbox.ErrUnavailable)
	} else {
		interp := false
		for _, p := range ef.Progs {
			interp = interp || p.Type == elf.PT_INTERP
		}
		ef.Close()
		if interp {
			return "", fmt.Errorf("agent binary %s is dynamically linked: the guest's init must be static (build with CGO_ENABLED=0): %w", bin, sandbox.ErrUnavailable)
		}
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("agent binary: %v: %w", err, sandbox.ErrUnavailable)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("agent binary: %v: %w", err, sandbox.ErrUnavailable)
	}
	h.Write([]byte(k.Manifest.VmlinuxSH))
	for _, m := range k.Modules {
		h.Write([]byte(m))
	}
	path := filepath.Join(b.cfg.CacheDir, "initrd-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if _, err := os.Stat(path); err == nil {
		b.initrd = path
		return path, nil
	}
	if err := os.MkdirAll(b.cfg.CacheDir, 0o700); err != nil {
		return "", fmt.Errorf("cache dir: %v: %w", err, sandbox.ErrUnavailable)
	}
	tmp, err := os.CreateTemp(b.cfg.CacheDir, ".initrd-*")
	if err != nil {
		return "", fmt.Errorf("initramfs: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer os.Remove(tmp.Name())
	err = writeInitramfs(tmp, bin, k.Modules, guest.ModulesDir, guest.ModulesOrder)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("initramfs: %v: %w", err, sandbox.ErrUnavailable)
	}
	b.initrd = path
	return path, nil
}

// rootLayers returns the layers of spec's image root (nil: none).
func rootLayers(spec sandbox.Spec) []string {
	if spec.Root == nil {
		return nil
	}
	return spec.Root.Layers
}
