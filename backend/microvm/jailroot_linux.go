package microvm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
)

// jailRoot is the VMM's whole file system, and who it runs as: the jail
// builds it on a fresh tmpfs, pivots into it and starts the VMM as uid 0
// of a user namespace that maps 0..Count-1 onto a leased host range. The
// VMM is then no host user: a VM escape owns no host file, cannot write a
// root-owned sysctl or sysfs file (the kernel grants those to global uid
// 0 by mode alone, capabilities or not), and sees nothing but what it
// needs. What it needs of the host (its directory, the kernel, the
// shares) is bound idmapped through the same mapping, so there it has
// exactly the access uid 0 without capabilities had, and the guest sees
// the files' owners unchanged.
type jailRoot struct {
	UID   int `json:"uid"` // host uid that 0 inside maps onto
	GID   int `json:"gid"`
	Count int `json:"count"`
	// System are host paths bound read-only at the same path (the VMM's
	// program, libraries and firmware); a host symbolic link among them
	// (merged /usr: /lib -> usr/lib) is made again as a link.
	System []string `json:"system"`
	// Devices are device nodes bound at the same path.
	Devices []string `json:"devices"`
	// Binds are host paths bound idmapped at Dst.
	Binds []jailBind `json:"binds"`
	// Fds is how many descriptors from 3 on the VMM inherits.
	Fds int `json:"fds,omitempty"`
}

// jailBind is one host path in the VMM's root.
type jailBind struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"` // absolute, inside the root
	ReadOnly bool   `json:"ro,omitempty"`
}

// The VMM's view of a Machine's paths (see jailView).
const (
	viewDir    = "/vm"
	viewKernel = "/kernel"
	viewInitrd = "/initrd"
	viewMem    = "/mem"
	viewShares = "/share"
)

// jailView returns m as the VMM sees it from its jail root, and the root:
// m's directory at /vm, its kernel, initramfs and RAM file at /kernel,
// /initrd and /mem, share i at /share/i; the VMM program's directory and
// /usr read-only; /dev/null, /dev/urandom and, under KVM, /dev/kvm.
func jailView(m *Machine, bin string, l idmap.Range) (*Machine, *jailRoot, error) {
	v := *m
	r := &jailRoot{UID: l.UID, GID: l.GID, Count: l.Count, System: systemPaths(bin),
		Devices: []string{"/dev/null", "/dev/urandom"}}
	if m.KVM {
		r.Devices = append(r.Devices, "/dev/kvm")
	}
	r.Binds = append(r.Binds, jailBind{Src: m.Dir, Dst: viewDir})
	v.Dir = viewDir
	r.Binds = append(r.Binds, jailBind{Src: m.Kernel, Dst: viewKernel, ReadOnly: true}, jailBind{Src: m.Initrd, Dst: viewInitrd, ReadOnly: true})
	v.Kernel, v.Initrd = viewKernel, viewInitrd
	if m.MemFile != "" {
		if m.Shared {
			// A template being made: QEMU fills the file, which must
			// exist to be bound.
			f, err := os.OpenFile(m.MemFile, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return nil, nil, fmt.Errorf("jail: template RAM file: %w", err)
			}
			f.Close()
		}
		// Writable even for a restored VM, which maps it copy-on-write:
		// QEMU 7.2 opens a RAM file read-write whatever the mapping
		// (its readonly=on makes the guest's RAM read-only).
		r.Binds = append(r.Binds, jailBind{Src: m.MemFile, Dst: viewMem})
		v.MemFile = viewMem
	}
	v.Shares = make([]Share, len(m.Shares))
	for i, s := range m.Shares {
		dst := viewShares + "/" + strconv.Itoa(i)
		r.Binds = append(r.Binds, jailBind{Src: s.Path, Dst: dst, ReadOnly: s.ReadOnly})
		v.Shares[i] = s
		v.Shares[i].Path = dst
	}
	// What the policy denies inside a share is hidden where the VMM sees
	// the share.
	v.Deny = nil
	for _, d := range m.Deny {
		for i, s := range m.Shares {
			if rel, err := filepath.Rel(s.Path, d); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				v.Deny = append(v.Deny, filepath.Join(v.Shares[i].Path, rel))
			}
		}
	}
	return &v, r, nil
}

// systemPaths are the host paths the VMM program needs read-only.
func systemPaths(bin string) []string {
	ps := []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache"}
	if d := filepath.Dir(bin); !strings.HasPrefix(d+"/", "/usr/") && d != "/bin" && d != "/sbin" {
		ps = append(ps, d)
	}
	return ps
}

// buildRoot makes the VMM's root at dir (a directory on the jail's
// scratch tmpfs) from r, hiding deny there, and pivots into it.
func buildRoot(dir string, r *jailRoot, deny []string, denyDir, denyFile string) error {
	if err := unix.Mount("root", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	for _, p := range r.System {
		if err := bindSystem(dir, p); err != nil {
			return err
		}
	}
	if err := bindDevices(dir, r.Devices); err != nil {
		return err
	}
	if err := bindMapped(dir, r); err != nil {
		return err
	}
	for _, d := range deny {
		st, err := os.Stat(filepath.Join(dir, d))
		if err != nil {
			continue
		}
		src := denyFile
		if st.IsDir() {
			src = denyDir
		}
		if err := bindReadOnly(src, filepath.Join(dir, d)); err != nil {
			return fmt.Errorf("deny %s: %w", d, err)
		}
	}
	for _, d := range []string{"proc", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("proc", filepath.Join(dir, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("root /proc: %w", err)
	}
	if err := unix.Mount("tmp", filepath.Join(dir, "tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=1m"); err != nil {
		return fmt.Errorf("root /tmp: %w", err)
	}
	return pivot(dir)
}

// bindSystem binds host path p read-only into root, or makes the link
// it is again.
func bindSystem(root, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return nil // not on this host
	}
	dst := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if err := mountPoint(dst, st.IsDir()); err != nil {
		return err
	}
	if err := unix.Mount(p, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV})
}

func bindDevices(root string, devs []string) error {
	for _, d := range devs {
		dst := filepath.Join(root, d)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := mountPoint(dst, false); err != nil {
			return err
		}
		if err := unix.Mount(d, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
	}
	return nil
}

// bindMapped binds r's paths idmapped into root, through a user
// namespace with r's mapping (a short-lived child holds it).
func bindMapped(root string, r *jailRoot) error {
	ns, stop, err := holdUserns(r)
	if err != nil {
		return err
	}
	defer stop()
	for _, b := range r.Binds {
		st, err := os.Stat(b.Src)
		if err != nil {
			return fmt.Errorf("%s: %w", b.Src, err)
		}
		dst := filepath.Join(root, b.Dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := mountPoint(dst, st.IsDir()); err != nil {
			return err
		}
		if err := attachMapped(b, dst, ns); err != nil {
			return err
		}
	}
	return nil
}

func attachMapped(b jailBind, dst string, ns *os.File) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, b.Src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone %s: %w", b.Src, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd())}
	if b.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("id-map %s for the VMM (idmapped mounts: Linux 5.12+ and a filesystem that supports them, such as ext4, xfs, btrfs or tmpfs): %w", b.Src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", b.Src, err)
	}
	return nil
}

func mountPoint(p string, dir bool) error {
	if dir {
		return os.Mkdir(p, 0o755)
	}
	return os.WriteFile(p, nil, 0o644)
}

// holdUserns starts a child in a new user namespace with r's mapping
// (this program, waiting on stdin) and opens that namespace.
func holdUserns(r *jailRoot) (*os.File, func(), error) {
	cmd := exec.Command("/proc/self/exe", JailCommand, holdSpec)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: r.UID, Size: r.Count}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: r.GID, Size: r.Count}},
		Pdeathsig:   syscall.SIGKILL,
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("user namespace for the VMM: %w", err)
	}
	stop := func() {
		in.Close()
		cmd.Wait()
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("user namespace for the VMM: %w", err)
	}
	return ns, func() { ns.Close(); stop() }, nil
}

// holdSpec is the jail's argument for holdUserns's child.
const holdSpec = `"hold"`

// holdMain is that child: it keeps its user namespace alive until its
// stdin closes.
func holdMain() int {
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// dropSpec is the jail's argument for the VMM's last step (dropMain).
const dropSpec = `"drop"`

// dropMain empties the bounding, inheritable and ambient capability
// sets, sets no_new_privs and execs argv: the VMM then starts with no
// capability even as uid 0 of its namespace.
func dropMain(argv []string) int {
	runtime.LockOSThread() // capability sets and no_new_privs are per thread
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		fmt.Fprintln(os.Stderr, "airlock "+JailCommand+": bad VMM command")
		return 2
	}
	if err := dropCaps(); err != nil {
		fmt.Fprintf(os.Stderr, "airlock %s: %v\n", JailCommand, err)
		return 125
	}
	err := unix.Exec(argv[0], argv, []string{})
	fmt.Fprintf(os.Stderr, "airlock %s: exec %s: %v\n", JailCommand, argv[0], err)
	return 127
}

// pivot makes dir the root and drops the old one.
func pivot(dir string) error {
	old := filepath.Join(dir, ".old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(dir, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return err
	}
	return unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// runVMM starts argv as uid 0 of a new user namespace with r's mapping
// (the jail has dropped every capability it could pass on), then waits
// for it and returns its exit status: the jail stays the PID
// namespace's init, so killing it ends the VMM.
func runVMM(argv []string, r *jailRoot) int {
	// A new user namespace gives its first process every capability in
	// it, and a full bounding set: the child drops them (dropMain)
	// before it becomes the VMM.
	cmd := exec.Command("/proc/self/exe", append([]string{JailCommand, dropSpec}, argv...)...)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	for i := 0; i < r.Fds; i++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(3+i), "inherited"))
	}
	// Creating the namespace changes no id: the child becomes the
	// mapped range's uid 0 only by setting its ids inside; and it must
	// carry no host group (supplementary groups are not mapped, yet they
	// count in permission checks), so the jail drops its own first.
	if err := syscall.Setgroups(nil); err != nil {
		fmt.Fprintf(os.Stderr, "airlock %s: setgroups: %v\n", JailCommand, err)
		return 125
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: r.UID, Size: r.Count}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: r.GID, Size: r.Count}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "airlock %s: start %s: %v\n", JailCommand, argv[0], err)
		return 127
	}
	for i := 3; i < 3+r.Fds; i++ {
		unix.Close(i)
	}
	// The child's id maps are written through /proc: read-only only now
	// (no sysctl is the VMM's to change, whoever it is).
	if err := unix.Mount("", "/proc", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		fmt.Fprintf(os.Stderr, "airlock %s: read-only /proc: %v\n", JailCommand, err)
		return 125
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 127
	}
	return 0
}
