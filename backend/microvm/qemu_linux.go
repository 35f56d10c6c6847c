package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/sandbox"
)

// qemuDriver runs VMs with qemu-system-x86_64 -M microvm.
type qemuDriver struct {
	bin   string // resolved qemu-system-x86_64
	agent string // the airlock binary (the jail helper)
	// ids is where each VMM's host id range comes from.
	ids func() (*idmap.Source, error)
}

func (d *qemuDriver) Name() string { return VMMQEMU }

func (d *qemuDriver) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, d.bin, "--version").Output()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// Socket names in a VM's directory.
const (
	agentSock = "agent.sock"
	qmpSock   = "qmp.sock"
)

// qemuArgs is the command line for m. Everything that shapes guest state
// (machine, devices and their order) is the same for a template and for
// the VMs restored from it; only backing paths differ.
func qemuArgs(m *Machine) []string {
	mem := strconv.Itoa(m.MemoryMiB) + "M"
	a := []string{
		"-name", "airlock-" + m.ID,
		"-machine", "microvm,acpi=on,x-option-roms=off,pit=off,pic=off,rtc=off,memory-backend=mem",
		"-m", mem,
		"-smp", strconv.Itoa(m.VCPUs),
		"-nodefaults", "-no-user-config", "-nographic", "-display", "none",
		"-serial", "stdio",
		"-no-reboot",
		// QEMU's own seccomp filter: no exec, no privilege changes, no
		// obsolete system calls, no scheduler or resource changes.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-qmp", "unix:" + filepath.Join(m.Dir, qmpSock) + ",server=on,wait=off",
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", m.Cmdline,
	}
	if m.KVM {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", "tcg", "-cpu", "max")
	}
	if m.MemFile != "" {
		share := "off"
		if m.Shared {
			share = "on"
		}
		a = append(a, "-object", "memory-backend-file,id=mem,size="+mem+",mem-path="+m.MemFile+",share="+share+",prealloc=off")
	} else {
		a = append(a, "-object", "memory-backend-ram,id=mem,size="+mem)
	}
	a = append(a,
		"-device", "virtio-serial-device,max_ports=2",
		"-chardev", "socket,id=agent,path="+filepath.Join(m.Dir, agentSock)+",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=airlock",
		"-object", "rng-random,id=rng,filename=/dev/urandom",
		"-device", "virtio-rng-device,rng=rng",
	)
	for i, s := range m.Shares {
		fs := "local,id=fs" + strconv.Itoa(i) + ",path=" + qemuOpt(s.Path) + ",security_model=none,multidevs=remap"
		if s.ReadOnly {
			fs += ",readonly=on"
		}
		a = append(a, "-fsdev", fs, "-device", "virtio-9p-device,fsdev=fs"+strconv.Itoa(i)+",mount_tag="+s.Tag)
	}
	if m.Incoming != "" {
		a = append(a, "-incoming", "defer") // Resume sets the capability, then loads fd 3
	}
	return a
}

// qemuOpt escapes a value for QEMU's option syntax (a comma is doubled).
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// Start runs QEMU through the jail helper (see jail_linux.go) in m's
// cgroup, in a root of its own and as uid 0 of a user namespace mapped
// onto a host id range leased for as long as it runs (see jailRoot).
func (d *qemuDriver) Start(ctx context.Context, m *Machine) (VM, error) {
	var extra []*os.File
	if m.Incoming != "" {
		f, err := os.Open(m.Incoming)
		if err != nil {
			return nil, fmt.Errorf("snapshot state: %v: %w", err, sandbox.ErrNotFound)
		}
		defer f.Close()
		extra = append(extra, f)
	}
	src, err := d.ids()
	if err != nil {
		return nil, fmt.Errorf("host ids for the VMM: %v: %w", err, sandbox.ErrUnavailable)
	}
	lease, err := src.Lease()
	if err != nil {
		return nil, fmt.Errorf("host ids for the VMM: %v: %w", err, sandbox.ErrUnavailable)
	}
	view, root, err := jailView(m, d.bin, lease.Range)
	if err != nil {
		lease.Release()
		return nil, fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)
	}
	root.Fds = len(extra)
	cmd, cleanup, err := jailCommand(d.agent, d.bin, qemuArgs(view), view, root)
	if err != nil {
		lease.Release()
		return nil, err
	}
	defer cleanup()
	cmd.ExtraFiles = extra
	v := &qemuVM{m: m, cmd: cmd, done: make(chan struct{}), out: &logtail.Tail{Max: 16 << 10}}
	cmd.Stdout, cmd.Stderr = v.out, v.out
	if err := cmd.Start(); err != nil {
		lease.Release()
		return nil, fmt.Errorf("start qemu: %v: %w", err, sandbox.ErrUnavailable)
	}
	go func() {
		v.waitErr = cmd.Wait()
		lease.Release()
		close(v.done)
	}()
	return v, nil
}

// qemuVM is one QEMU process.
type qemuVM struct {
	m       *Machine
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	out     *logtail.Tail

	qmpOnce sync.Once
	q       *qmp
	qErr    error
}

func (v *qemuVM) Pid() int              { return v.cmd.Process.Pid }
func (v *qemuVM) Done() <-chan struct{} { return v.done }
func (v *qemuVM) Output() string        { return v.out.String() }
func (v *qemuVM) exitErr() error {
	return fmt.Errorf("qemu exited (%v): %s: %w", v.waitErr, lastLines(v.out.String(), 6), sandbox.ErrUnavailable)
}
func (v *qemuVM) exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// Channel connects to the agent's virtio-serial chardev.
func (v *qemuVM) Channel(ctx context.Context) (net.Conn, error) {
	path := filepath.Join(v.m.Dir, agentSock)
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent channel: %w", errors.Join(err, ctx.Err(), sandbox.ErrTimeout))
		case <-v.done:
			return nil, v.exitErr()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (v *qemuVM) qmp(ctx context.Context) (*qmp, error) {
	v.qmpOnce.Do(func() { v.q, v.qErr = dialQMP(ctx, filepath.Join(v.m.Dir, qmpSock), v.done) })
	return v.q, v.qErr
}

// ignoreShared makes migration skip RAM in a shared file (the template's
// RAM file is the RAM: only device state goes into the stream).
var ignoreShared = map[string]any{"capabilities": []map[string]any{{"capability": "x-ignore-shared", "state": true}}}

// Resume loads the device state (fd 3) of a VM started with Incoming,
// waits for the load to finish, then starts the vCPUs.
func (v *qemuVM) Resume(ctx context.Context) error {
	q, err := v.qmp(ctx)
	if err != nil {
		return err
	}
	if v.m.Incoming != "" {
		if _, err := q.run(ctx, "migrate-set-capabilities", ignoreShared, nil); err != nil {
			return err
		}
		if _, err := q.run(ctx, "migrate-incoming", map[string]string{"uri": "fd:3"}, nil); err != nil {
			return err
		}
	}
	for {
		st, err := q.status(ctx)
		if err != nil {
			return err
		}
		switch st {
		case "running":
			return nil
		case "inmigrate":
			select {
			case <-ctx.Done():
				return fmt.Errorf("restore: %w", errors.Join(ctx.Err(), sandbox.ErrTimeout))
			case <-v.done:
				return v.exitErr()
			case <-time.After(time.Millisecond):
			}
			continue
		case "paused", "prelaunch", "postmigrate":
			_, err := q.run(ctx, "cont", nil, nil)
			return err
		default:
			return fmt.Errorf("restore: VM is %q", st)
		}
	}
}

// SaveState stops the vCPUs and migrates the device state (RAM in a shared
// file is skipped: x-ignore-shared) into path. When QEMU refuses (a 9p
// share mounted in the guest blocks migration), the VM runs on.
func (v *qemuVM) SaveState(ctx context.Context, path string) (err error) {
	q, err := v.qmp(ctx)
	if err != nil {
		return err
	}
	if _, err := q.run(ctx, "stop", nil, nil); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			q.run(context.Background(), "cont", nil, nil)
		}
	}()
	if v.m.MemFile != "" && v.m.Shared {
		if _, err := q.run(ctx, "migrate-set-capabilities", ignoreShared, nil); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := q.run(ctx, "getfd", map[string]string{"fdname": "state"}, f); err != nil {
		return err
	}
	if _, err := q.run(ctx, "migrate", map[string]string{"uri": "fd:state"}, nil); err != nil {
		return err
	}
	for {
		raw, err := q.run(ctx, "query-migrate", nil, nil)
		if err != nil {
			return err
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		json.Unmarshal(raw, &st)
		switch st.Status {
		case "completed":
			return f.Sync()
		case "failed", "cancelled":
			return fmt.Errorf("snapshot: migration %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("snapshot: %w", errors.Join(ctx.Err(), sandbox.ErrTimeout))
		case <-time.After(time.Millisecond):
		}
	}
}

// Kill ends QEMU (SIGKILL: the guest has no state worth a clean shutdown;
// its RAM file, if any, is the caller's) and waits for it.
func (v *qemuVM) Kill() {
	if v.q != nil {
		v.q.close()
	}
	if !v.exited() {
		v.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-v.done
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// vmmIDs is where the VMMs' host id ranges come from (Config.HostIDs).
func (b *Backend) vmmIDs() (*idmap.Source, error) {
	b.idsOnce.Do(func() {
		b.ids = b.cfg.HostIDs
		if b.ids == nil {
			b.ids, b.idsErr = idmap.Default(hostfs.StateDir("idmap"))
		}
	})
	return b.ids, b.idsErr
}
