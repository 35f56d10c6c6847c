package microvm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Info finds the VMM, the guest kernel and the accelerator, once per
// Backend (the KVM verdict is also cached on disk, per host boot).
func (b *Backend) Info(ctx context.Context) Info {
	b.infoOnce.Do(func() { b.info = b.discover(ctx) })
	return b.info
}

func (b *Backend) discover(ctx context.Context) Info {
	var info Info
	k, err := b.loadKernel()
	info.Kernel = k.Dir
	info.KernelPkg = strings.TrimSpace(k.Manifest.Package + " " + k.Manifest.Version)
	info.kernel = k
	if err != nil {
		info.Err = err
		return info
	}
	if p, err := exec.LookPath(orDefault(b.cfg.Firecracker, "firecracker")); err == nil {
		info.Firecracker = p
		if out, err := exec.CommandContext(ctx, p, "--version").Output(); err == nil {
			info.FCVersion, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		}
	}
	switch b.cfg.VMM {
	case VMMAuto, VMMQEMU:
		info.VMM = VMMQEMU
	case VMMFirecracker:
		info.VMM = VMMFirecracker
		info.Err = fmt.Errorf("firecracker: sandboxes need shared host directories and Firecracker has no shared-filesystem device (no 9p, no virtio-fs); its driver is built and its API requests tested, but it is untested on real hardware and not used for sandboxes yet: %w", sandbox.ErrUnavailable)
		return info
	default:
		info.Err = fmt.Errorf("vmm %q: unknown (qemu, firecracker): %w", b.cfg.VMM, sandbox.ErrInvalid)
		return info
	}
	qemu, err := exec.LookPath(orDefault(b.cfg.QEMU, "qemu-system-x86_64"))
	if err != nil {
		info.Err = fmt.Errorf("qemu-system-x86_64 not found (Debian: apt-get install qemu-system-x86): %w", sandbox.ErrUnavailable)
		return info
	}
	info.QEMU = qemu
	d := &qemuDriver{bin: qemu, agent: b.cfg.AgentBinary, ids: b.vmmIDs}
	if info.QEMUVersion, err = d.Version(ctx); err != nil {
		info.Err = fmt.Errorf("%s --version: %v: %w", qemu, err, sandbox.ErrUnavailable)
		return info
	}
	if os.Geteuid() != 0 {
		info.Err = fmt.Errorf("the microvm backend runs as root (it confines the VMM in its own namespaces and cgroup): %w", sandbox.ErrUnavailable)
		return info
	}
	switch b.cfg.Accel {
	case AccelTCG:
		info.Accel, info.KVM = AccelTCG, "not used (accel tcg configured)"
	case AccelAuto, AccelKVM:
		ok, why := b.kvmWorks(ctx, d, k, info.QEMUVersion)
		info.KVM = why
		info.Accel = AccelTCG
		if ok {
			info.Accel = AccelKVM
		} else if b.cfg.Accel == AccelKVM {
			info.Err = fmt.Errorf("accel kvm: %s: %w", why, sandbox.ErrUnavailable)
		}
	default:
		info.Err = fmt.Errorf("accel %q: unknown (kvm, tcg): %w", b.cfg.Accel, sandbox.ErrInvalid)
	}
	return info
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// kvmVerdict is the cached outcome of the KVM probe.
type kvmVerdict struct {
	Key string `json:"key"`
	OK  bool   `json:"ok"`
	Why string `json:"why"`
}

// kvmWorks boots a probe guest under KVM (the real kernel and init, a
// config that only asks for an answer) unless a verdict for this host boot,
// QEMU and kernel is cached. A /dev/kvm that opens is not enough: on some
// hosts it answers ioctls yet every Linux guest dies.
func (b *Backend) kvmWorks(ctx context.Context, d *qemuDriver, k kernelFiles, qemuVersion string) (bool, string) {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return false, "no /dev/kvm"
	}
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h := sha256.Sum256([]byte(strings.TrimSpace(string(bootID)) + "|" + qemuVersion + "|" + k.Manifest.VmlinuxSH))
	key := hex.EncodeToString(h[:8])
	cache := filepath.Join(b.cfg.CacheDir, "kvm-probe.json")
	if raw, err := os.ReadFile(cache); err == nil {
		var v kvmVerdict
		if json.Unmarshal(raw, &v) == nil && v.Key == key {
			return v.OK, v.Why + " (cached for this host boot)"
		}
	}
	ok, why := b.bootProbe(ctx, d, k)
	if raw, err := json.Marshal(kvmVerdict{Key: key, OK: ok, Why: why}); err == nil {
		os.MkdirAll(b.cfg.CacheDir, 0o700)
		os.WriteFile(cache, raw, 0o600)
	}
	return ok, why
}

// bootProbe boots the guest under KVM and waits for its init's answer.
func (b *Backend) bootProbe(ctx context.Context, d *qemuDriver, k kernelFiles) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	initrd, err := b.initramfs(k)
	if err != nil {
		return false, "probe: " + err.Error()
	}
	id := "kvmprobe-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(b.vmsDir(), id)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, "probe: " + err.Error()
	}
	defer os.RemoveAll(dir)
	m := &Machine{ID: id, Dir: dir, Kernel: k.Vmlinux, Initrd: initrd, Cmdline: kernelCmdline(true), VCPUs: 1, MemoryMiB: 256, KVM: true, Shares: b.padShares(nil)}
	vm, err := d.Start(ctx, m)
	if err != nil {
		return false, "probe: " + err.Error()
	}
	defer vm.Kill()
	t0 := time.Now()
	conn, err := vm.Channel(ctx)
	if err != nil {
		return false, "the probe guest did not boot under KVM: " + lastLines(vm.Output(), 2)
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	if err := handshake(conn, true, &probeConfig); err != nil {
		return false, "the probe guest did not boot under KVM: " + lastLines(vm.Output(), 2)
	}
	return true, fmt.Sprintf("a probe guest booted under KVM in %d ms", time.Since(t0).Milliseconds())
}

// hostKHz is the host's TSC frequency in kHz, for the guest's command
// line under TCG (without it the guest hangs calibrating its TSC).
func hostKHz() int64 {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil && mhz > 0 {
				return int64(mhz * 1000)
			}
		}
	}
	return 0
}

// guestHZ is CONFIG_HZ of Debian's amd64 kernel (loops_per_jiffy is per
// jiffy).
const guestHZ = 250

// GuestCmdline is the kernel command line microVMs boot with (under KVM
// or TCG); benchmarks boot their peer with the same one.
func GuestCmdline(kvm bool) string { return kernelCmdline(kvm) }

// kernelCmdline is the guest's command line: the serial console quiet,
// no reboot (a panic ends the VM), under TCG the TSC frequency and
// loops_per_jiffy given so that the guest does not calibrate them, and
// the airlock init after "--".
func kernelCmdline(kvm bool) string {
	c := "console=ttyS0 quiet loglevel=1 panic=-1 reboot=t 8250.nr_uarts=1 random.trust_cpu=on"
	if !kvm {
		if khz := hostKHz(); khz > 0 {
			c += " tsc_early_khz=" + strconv.FormatInt(khz, 10) + " lpj=" + strconv.FormatInt(khz*1000/guestHZ, 10)
		}
	}
	return c + " -- __vminit"
}

// Probe reports whether this host can run microVM sandboxes: the VMM and
// its version, the accelerator and what the KVM probe found, the guest
// kernel; when not, why and what to install.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	info := b.Info(ctx)
	p := sandbox.Probe{Available: info.Err == nil, Isolation: "hardware", Details: map[string]string{}}
	if info.Err != nil {
		p.Reason = info.Err.Error()
	}
	set := func(k, v string) {
		if v != "" {
			p.Details[k] = v
		}
	}
	set("vmm", info.VMM)
	set("qemu", info.QEMU)
	set("qemu_version", info.QEMUVersion)
	set("accel", info.Accel)
	set("kvm", info.KVM)
	set("kernel", info.Kernel)
	set("kernel_package", info.KernelPkg)
	if info.Firecracker != "" {
		set("firecracker", info.Firecracker+" "+info.FCVersion+" (driver untested on real hardware; not used for sandboxes yet)")
	} else {
		p.Details["firecracker"] = "not installed (its driver is untested on real hardware)"
	}
	p.Details["state_dir"] = b.cfg.StateDir
	return p
}
