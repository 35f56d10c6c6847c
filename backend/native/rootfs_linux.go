package native

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/imageroot"
)

const (
	oldRoot  = "/oldroot"
	denyFile = "/.airlock-deny"
	// bootIDFile holds the sandbox's boot id until it is bound over
	// procfs's (see writeBootID); removed like denyFile.
	bootIDFile = "/.airlock-boot-id"
	stageDir   = "/.airlock-files"
	bindFlags  = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// buildRoot assembles the sandbox's root filesystem on a fresh tmpfs and
// pivots into it, detaching the host's root.
func buildRoot(cfg *initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return stage("make / private", err)
	}
	size := cfg.RootSize
	if size <= 0 {
		size = 8 << 20
	}
	// The base tmpfs (or the image's overlay) goes on /tmp of our private
	// mount namespace; after pivot_root it is "/" and the host's root
	// (including the real /tmp) is visible under /oldroot until detached.
	if cfg.Overlay != nil {
		if err := mountOverlay(cfg.Overlay); err != nil {
			return stage("mount image root (overlayfs)", err)
		}
	} else if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+strconv.FormatInt(size, 10)); err != nil {
		return stage("mount root tmpfs", err)
	}
	if err := os.Mkdir("/tmp"+oldRoot, 0o700); err != nil {
		return stage("mkdir oldroot", err)
	}
	if err := unix.PivotRoot("/tmp", "/tmp"+oldRoot); err != nil {
		return stage("pivot_root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return stage("chdir /", err)
	}
	// An inaccessible empty file to bind over denied files.
	if fd, err := unix.Open(denyFile, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
	} else {
		return stage("create deny file", err)
	}
	if err := writeBootID(); err != nil {
		return stage("create boot id", err)
	}
	var readOnly []string // tmpfs mounts made read-only once populated
	for i, op := range cfg.Mounts {
		if err := doMount(cfg, i, op, &readOnly); err != nil {
			return stage(fmt.Sprintf("%s %s", op.Kind, op.Dst), err)
		}
	}
	if err := unix.Unmount(oldRoot, unix.MNT_DETACH); err != nil {
		return stage("detach old root", err)
	}
	if err := os.Remove(oldRoot); err != nil {
		return stage("remove oldroot", err)
	}
	_ = os.RemoveAll(stageDir)
	if err := os.Remove(denyFile); err != nil {
		return stage("remove deny file", err)
	}
	if err := os.Remove(bootIDFile); err != nil {
		return stage("remove boot id file", err)
	}
	if cfg.Overlay == nil {
		readOnly = append(readOnly, "/") // an image's root keeps its writable layer
	}
	for _, p := range readOnly {
		if err := setattr(p, unix.MOUNT_ATTR_RDONLY, false); err != nil {
			return stage("read-only "+p, err)
		}
	}
	return nil
}

func host(p string) string { return oldRoot + p }

// mountOverlay mounts the image's overlay at /tmp (the future root): the
// layers read-only below the sandbox's writable layer, nosuid and nodev.
// It runs in the sandbox's user and mount namespaces, so the mount is
// the sandbox's alone and goes away with it.
func mountOverlay(o *overlayRoot) error {
	if o.FD {
		err := imageroot.Attach(fdOverlay, "/tmp")
		unix.Close(fdOverlay)
		return err
	}
	if o.Mapped > 0 {
		return mountMapped(o.Mapped)
	}
	if o.Chdir != "" {
		if err := unix.Chdir(o.Chdir); err != nil {
			return err
		}
		defer unix.Chdir("/")
	}
	return unix.Mount("overlay", "/tmp", "overlay", unix.MS_NOSUID|unix.MS_NODEV, o.Options)
}

// mountMapped mounts the overlay at /tmp from the idmapped layers the
// host sent (n layers, then the writable layer's directory), in the
// sandbox's user namespace: copy-ups carry its credentials.
func mountMapped(n int) error {
	if len(receivedLayers) < n+1 {
		return fmt.Errorf("image root: %d layer descriptors from the host, want %d", len(receivedLayers), n+1)
	}
	fds := receivedLayers[:n+1]
	receivedLayers = receivedLayers[n+1:] // idmapped binds (opMapped) follow the layers
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	// overlayfs takes private clones of its layers, which it may do only
	// of mounts in our own namespace: attach them first, on a small tmpfs
	// at /tmp, detached once the overlay is made.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
		return fmt.Errorf("image root: staging tmpfs: %w", err)
	}
	paths := make([]string, len(fds))
	for i, fd := range fds {
		paths[i] = "/tmp/" + strconv.Itoa(i)
		if err := os.Mkdir(paths[i], 0o700); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
		if err := imageroot.Attach(fd, paths[i]); err != nil {
			return fmt.Errorf("image root: attach layer %d: %w", i, err)
		}
	}
	w := &imageroot.Writable{Dir: paths[n], Upper: paths[n] + "/upper", Work: paths[n] + "/work"}
	ov, err := imageroot.Detached(paths[:n], w)
	if err != nil {
		return err
	}
	defer ov.Close()
	// The overlay holds its own clones of the layers: the staging tmpfs
	// goes now, or it would shadow the host's /tmp under the old root
	// (a bind from there, a workspace in /tmp, would find nothing).
	if err := unix.Unmount("/tmp", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("image root: detach staging tmpfs: %w", err)
	}
	return imageroot.Attach(int(ov.Fd()), "/tmp")
}

// setattr sets mount attributes on the mount at p (and below if rec).
func setattr(p string, attrs uint64, rec bool) error {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if rec {
		flags |= unix.AT_RECURSIVE
	}
	return unix.MountSetattr(unix.AT_FDCWD, p, uint(flags), &unix.MountAttr{Attr_set: attrs})
}

// mountPoint makes sure dst exists as a directory or an empty file.
func mountPoint(dst string, dir bool) error {
	if dir {
		return os.MkdirAll(dst, 0o755)
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(dst, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

func tmpfsData(mode uint32, size int64) string {
	d := "mode=" + strconv.FormatUint(uint64(mode), 8)
	if size > 0 {
		d += ",size=" + strconv.FormatInt(size, 10)
	}
	return d
}

func doMount(cfg *initConfig, i int, op mountOp, readOnly *[]string) error {
	switch op.Kind {
	case opBind:
		if err := mountPoint(op.Dst, op.Dir); err != nil {
			return err
		}
		if err := unix.Mount(host(op.Src), op.Dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		attrs := uint64(bindFlags)
		if op.RO {
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		return setattr(op.Dst, attrs, true)
	case opMapped:
		return attachMapped(op)
	case opSymlink:
		if err := os.MkdirAll(filepath.Dir(op.Dst), 0o755); err != nil {
			return err
		}
		return os.Symlink(op.Link, op.Dst)
	case opTmpfs:
		if err := os.MkdirAll(op.Dst, 0o755); err != nil {
			return err
		}
		return unix.Mount("tmpfs", op.Dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsData(op.Mode, op.Size))
	case opProc:
		return mountProc(op.Dst)
	case opDev:
		if err := mountDev(op.Dst, op.Size); err != nil {
			return err
		}
		*readOnly = append(*readOnly, op.Dst)
		return nil
	case opFile:
		if err := os.MkdirAll(stageDir, 0o700); err != nil {
			return err
		}
		src := filepath.Join(stageDir, strconv.Itoa(i))
		if err := os.WriteFile(src, op.Data, os.FileMode(op.Mode)); err != nil {
			return err
		}
		if err := mountPoint(op.Dst, false); err != nil {
			return err
		}
		if err := unix.Mount(src, op.Dst, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return setattr(op.Dst, bindFlags|unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOEXEC, false)
	case opDenyDir:
		mode := uint32(0)
		for _, later := range cfg.Mounts[i+1:] {
			if strings.HasPrefix(later.Dst, op.Dst+"/") {
				mode = 0o111 // traversable to the mounts below, not listable
				break
			}
		}
		if err := unix.Mount("tmpfs", op.Dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, tmpfsData(mode, 64<<10)); err != nil {
			return err
		}
		*readOnly = append(*readOnly, op.Dst)
		return nil
	case opDenyFile:
		if err := unix.Mount(denyFile, op.Dst, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		return setattr(op.Dst, bindFlags|unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOEXEC, false)
	}
	return fmt.Errorf("unknown mount kind %q", op.Kind)
}

// attachMapped attaches the next idmapped bind the host sent at op.Dst,
// with a bind's attributes.
func attachMapped(op mountOp) error {
	if len(receivedLayers) == 0 {
		return fmt.Errorf("idmapped bind %s: no descriptor from the host", op.Dst)
	}
	fd := receivedLayers[0]
	receivedLayers = receivedLayers[1:]
	defer unix.Close(fd)
	if err := mountPoint(op.Dst, op.Dir); err != nil {
		return err
	}
	if err := imageroot.Attach(fd, op.Dst); err != nil {
		return err
	}
	attrs := uint64(bindFlags)
	if op.RO {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	return setattr(op.Dst, attrs, true)
}

// procReadOnly are procfs paths bound read-only over themselves; procMask
// are hidden behind the empty deny file.
var (
	procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMask     = []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kmsg"}
)

func mountProc(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("proc", dst, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	// No code from anonymous memory files: memfds are created sealed
	// non-executable and MFD_EXEC is refused, in this pid namespace and
	// below (the value can only be raised). Best effort: the sysctl file
	// belongs to host root, so a rootless init cannot write it.
	_ = os.WriteFile(dst+"/sys/vm/memfd_noexec", []byte("2"), 0)
	for _, p := range procReadOnly {
		p = dst + "/" + p
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := setattr(p, bindFlags|unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_RDONLY, true); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	masks := map[string]string{"sys/kernel/random/boot_id": bootIDFile}
	for _, p := range procMask {
		masks[p] = denyFile
	}
	for p, src := range masks {
		p = dst + "/" + p
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("mask %s: %w", p, err)
		}
		if err := setattr(p, bindFlags|unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_RDONLY, false); err != nil {
			return err
		}
	}
	return nil
}

// writeBootID writes bootIDFile: a random boot id (the kernel's form, a
// version 4 UUID) for this life of the sandbox, bound read-only over
// /proc/sys/kernel/random/boot_id. Programs read it to learn whether the
// machine restarted since they wrote state (what ran before is gone): a
// sandbox's life is that boot, so a sandbox started again from its files
// (a resume without memory) gets a new one, a frozen one keeps its own,
// and no sandbox reads the host's.
func writeBootID() error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	fd, err := unix.Open(bootIDFile, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(id))
	return err
}

// mountDev makes a minimal /dev: host device nodes bound in, a private
// devpts with its own ptmx, a private /dev/shm and the usual links.
func mountDev(dst string, shmSize int64) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range devNodes {
		p := dst + "/" + n
		if err := mountPoint(p, false); err != nil {
			return err
		}
		// No attribute change: nosuid/noexec mean nothing on a device node
		// (execve needs a regular file), and the node must stay usable.
		if err := unix.Mount(host("/dev/"+n), p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
	}
	pts := dst + "/pts"
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	shm := dst + "/shm"
	if err := os.Mkdir(shm, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, tmpfsData(0o1777, shmSize)); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, dst+"/"+name); err != nil {
			return err
		}
	}
	return nil
}
