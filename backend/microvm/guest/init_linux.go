package guest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
)

// Main runs the VM's init: set up, serve the agent until the host closes
// the channel, power off. It never returns when it is PID 1.
func Main(serve func(context.Context, io.ReadWriteCloser, agent.ServeOptions) error) int {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "airlock __vminit: not PID 1 (it is a microVM's init, started by the kernel)")
		return 2
	}
	err := run(serve)
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock-init: %v\n", err)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func run(serve func(context.Context, io.ReadWriteCloser, agent.ServeOptions) error) error {
	for _, m := range []struct{ src, dst, typ string }{
		{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, unix.MS_NOSUID, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	vsock := strings.Contains(" "+strings.TrimSpace(string(cmdline))+" ", " "+VsockFlag+" ")
	consoleStdio()
	if err := loadModules(vsock); err != nil {
		return err
	}
	ch, err := openChannel(vsock)
	if err != nil {
		return err
	}
	if _, err := ch.Write([]byte{bootproto.Ready}); err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	cfg, err := bootproto.ReadConfig(&patientReader{f: ch})
	if err != nil {
		return fmt.Errorf("boot config: %w", err)
	}
	cg, err := setup(cfg)
	if err != nil {
		bootproto.WriteAnswer(ch, err)
		return err
	}
	if cfg.Probe {
		return bootproto.WriteAnswer(ch, nil)
	}
	// Sandbox processes are forked by the agent's spawn thread: with an
	// empty bounding set there, and no_new_privs, nothing they exec (set-uid
	// programs included) has a capability, so they can neither undo the
	// mounts (deny, read-only) nor load modules or reach raw devices.
	if err := agent.PrepareSpawnThread(dropCapabilities); err != nil {
		bootproto.WriteAnswer(ch, err)
		return err
	}
	if err := enterRoot(); err != nil {
		bootproto.WriteAnswer(ch, err)
		return err
	}
	if err := bootproto.WriteAnswer(ch, nil); err != nil {
		return err
	}
	return serve(context.Background(), ch, agent.ServeOptions{ProcessCgroup: cg})
}

// consoleStdio gives the init the console as stdin, stdout and stderr
// when the kernel could not (the initramfs has no /dev/console): its
// error messages then reach the VMM's output.
func consoleStdio() {
	if _, err := unix.FcntlInt(2, unix.F_GETFD, 0); err == nil {
		return
	}
	fd, err := unix.Open("/dev/console", unix.O_RDWR, 0)
	if err != nil {
		return
	}
	for i := 0; i < 3; i++ {
		if i != fd {
			unix.Dup3(fd, i, 0)
		}
	}
	if fd > 2 {
		unix.Close(fd)
	}
}

// patientReader reads the channel during boot: a virtio-serial port reads
// EOF while no host is connected (a VM restored from a template starts
// that way), so EOF means "not yet" until the config has arrived.
type patientReader struct{ f *os.File }

func (p *patientReader) Read(b []byte) (int, error) {
	for {
		n, err := p.f.Read(b)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// loadModules loads the initramfs's modules in their order; vsock's only
// when it is the channel (otherwise AF_VSOCK does not exist in the guest).
func loadModules(vsock bool) error {
	b, err := os.ReadFile("/" + ModulesOrder)
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	for _, name := range strings.Fields(string(b)) {
		if !vsock && strings.Contains(name, "vsock") {
			continue
		}
		f, err := os.Open(filepath.Join("/", ModulesDir, name))
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", name, err)
		}
	}
	return nil
}

// openChannel opens the agent channel: the virtio-serial port named
// PortName, or under Firecracker (VsockFlag) the first connection to
// VsockPort. Devices appear asynchronously once their driver is loaded.
func openChannel(vsock bool) (*os.File, error) {
	if vsock {
		return acceptVsock()
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/sys/class/virtio-ports")
		for _, e := range ents {
			name, err := os.ReadFile(filepath.Join("/sys/class/virtio-ports", e.Name(), "name"))
			if err != nil || strings.TrimSpace(string(name)) != PortName {
				continue
			}
			f, err := os.OpenFile("/dev/"+e.Name(), os.O_RDWR|unix.O_CLOEXEC, 0)
			if err == nil {
				return f, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil, errors.New("no virtio-serial port named " + PortName)
}

func acceptVsock() (*os.File, error) {
	var fd int
	var err error
	for i := 0; i < 3000; i++ { // the transport module probes asynchronously
		if fd, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("vsock socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: VsockPort}); err != nil {
		return nil, fmt.Errorf("vsock bind: %w", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		return nil, fmt.Errorf("vsock listen: %w", err)
	}
	c, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("vsock accept: %w", err)
	}
	return os.NewFile(uintptr(c), "vsock"), nil
}

// setup applies cfg: clock, entropy, hostname, loopback, the sandbox's
// cgroup and its root under sandboxRoot. It returns the cgroup's directory.
func setup(cfg *bootproto.Config) (*os.File, error) {
	if cfg.TimeNanos > 0 {
		tv := unix.NsecToTimeval(cfg.TimeNanos)
		if err := unix.Settimeofday(&tv); err != nil {
			return nil, fmt.Errorf("set clock: %w", err)
		}
	}
	if len(cfg.Seed) > 0 {
		if err := addEntropy(cfg.Seed); err != nil {
			return nil, err
		}
	}
	if cfg.Probe {
		return nil, nil
	}
	// The guest kernel's own settings: no user namespaces for anyone (a
	// large kernel attack surface the sandbox has no use for).
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		return nil, fmt.Errorf("disable user namespaces: %w", err)
	}
	if cfg.Hostname != "" {
		if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
			return nil, fmt.Errorf("hostname: %w", err)
		}
	}
	if cfg.Loopback {
		if err := loopbackUp(); err != nil {
			return nil, err
		}
	}
	if cfg.NoFile > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: cfg.NoFile, Max: cfg.NoFile}); err != nil {
			return nil, fmt.Errorf("open files limit: %w", err)
		}
	}
	cg, err := makeCgroup(cfg)
	if err != nil {
		return nil, err
	}
	if err := buildRoot(cfg); err != nil {
		cg.Close()
		return nil, err
	}
	return cg, nil
}

// addEntropy mixes seed into the kernel's pool and credits it: a VM
// restored from a template starts with the template's RNG state.
func addEntropy(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("entropy: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(buf[0:], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(buf[4:], uint32(len(seed)))
	copy(buf[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return fmt.Errorf("entropy: RNDADDENTROPY: %w", e)
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// makeCgroup makes the cgroup every sandbox process starts in, with the
// pids and memory limits (the agent stays outside it).
func makeCgroup(cfg *bootproto.Config) (*os.File, error) {
	const root = "/sys/fs/cgroup"
	if err := unix.Mount("cgroup2", root, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount cgroup2: %w", err)
	}
	if err := os.WriteFile(root+"/cgroup.subtree_control", []byte("+pids +memory"), 0); err != nil {
		return nil, fmt.Errorf("cgroup controllers: %w", err)
	}
	dir := root + "/sandbox"
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if cfg.Pids > 0 {
		if err := os.WriteFile(dir+"/pids.max", []byte(strconv.FormatInt(cfg.Pids, 10)), 0); err != nil {
			return nil, fmt.Errorf("pids limit: %w", err)
		}
	}
	if cfg.MemoryMax > 0 {
		if err := os.WriteFile(dir+"/memory.max", []byte(strconv.FormatInt(cfg.MemoryMax, 10)), 0); err != nil {
			return nil, fmt.Errorf("memory limit: %w", err)
		}
		os.WriteFile(dir+"/memory.swap.max", []byte("0"), 0)
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return f, nil
}

// dropCapabilities runs on the agent's spawn thread (see run).
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return installSeccomp()
}

// enterRoot makes sandboxRoot the root (initramfs cannot pivot_root: move
// it over / and chroot, as switch_root does).
func enterRoot() error {
	if err := unix.Chdir(sandboxRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return unix.Chdir("/")
}
