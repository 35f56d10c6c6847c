package oci

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Every path inside the container's rootfs is resolved with openat2 and
// RESOLVE_IN_ROOT against the rootfs: a symlink in the image can never
// send a mount outside it. Bind mounts are made with open_tree, their
// attributes set with mount_setattr before move_mount makes them visible,
// so a bind is never writable or set-id capable for a moment.

const resolveIn = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// openIn opens rel (a container path) below root, O_PATH.
func openIn(root int, rel string) (int, error) {
	rel = strings.TrimLeft(rel, "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveIn})
}

// mkdirAllIn makes the directory rel and its parents below root.
func mkdirAllIn(root int, rel string) error {
	cur := ""
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		cur += "/" + c
		fd, err := openIn(root, cur)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return err
		}
		dfd, err := openIn(root, path.Dir(cur))
		if err != nil {
			return err
		}
		err = unix.Mkdirat(dfd, c, 0o755)
		unix.Close(dfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// target opens the mount point rel below root, making it (a directory, or
// an empty file when dir is false) when missing.
func target(root int, rel string, dir bool) (int, error) {
	fd, err := openIn(root, rel)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, err
	}
	if dir {
		if err := mkdirAllIn(root, rel); err != nil {
			return -1, err
		}
		return openIn(root, rel)
	}
	if err := mkdirAllIn(root, path.Dir(rel)); err != nil {
		return -1, err
	}
	f, err := unix.Openat2(root, strings.TrimPrefix(rel, "/"), &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o644, Resolve: resolveIn})
	if err != nil {
		return -1, err
	}
	unix.Close(f)
	return openIn(root, rel)
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// attrsOf converts MS_* flags to MOUNT_ATTR_* bits.
func attrsOf(flags uintptr) uint64 {
	var a uint64
	for _, m := range []struct {
		ms   uintptr
		attr uint64
	}{{unix.MS_RDONLY, unix.MOUNT_ATTR_RDONLY}, {unix.MS_NOSUID, unix.MOUNT_ATTR_NOSUID},
		{unix.MS_NODEV, unix.MOUNT_ATTR_NODEV}, {unix.MS_NOEXEC, unix.MOUNT_ATTR_NOEXEC},
		{unix.MS_NOATIME, unix.MOUNT_ATTR_NOATIME}, {unix.MS_NODIRATIME, unix.MOUNT_ATTR_NODIRATIME}} {
		if flags&m.ms != 0 {
			a |= m.attr
		}
	}
	return a
}

// bindAt clones the tree at src (a host path, or an fd with src "")
// with attrs, and moves it onto the target fd.
func bindAt(srcDir int, src string, recursive bool, attrs uint64, dst int) error {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if src == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	tree, err := unix.OpenTree(srcDir, src, flags)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tree)
	if attrs != 0 {
		setFlags := uint(unix.AT_EMPTY_PATH)
		if recursive {
			setFlags |= unix.AT_RECURSIVE
		}
		if err := unix.MountSetattr(tree, "", setFlags, &unix.MountAttr{Attr_set: attrs}); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// setupRoot builds the container's mounts on its rootfs and pivots into
// it. It runs in the init's new mount namespace, before anything of the
// container runs.
func setupRoot(p *initPlan) error {
	if err := unix.Mount("", "/", "", p.Propagation|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("root propagation: %w", err)
	}
	if err := unix.Mount(p.Rootfs, p.Rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind rootfs %s: %w", p.Rootfs, err)
	}
	root, err := unix.Open(p.Rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open rootfs: %w", err)
	}
	defer unix.Close(root)
	hasDev := false
	for _, m := range p.Mounts {
		if err := doMount(root, m); err != nil {
			return fmt.Errorf("mount %s (%s): %w", m.Dst, m.Type, err)
		}
		if m.Dst == "/dev" {
			hasDev = true
		}
	}
	if err := makeDev(root, p.Devices, hasDev); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	for _, m := range p.Masked {
		if err := mask(root, m); err != nil {
			return fmt.Errorf("mask %s: %w", m, err)
		}
	}
	for _, r := range p.ReadOnly {
		if err := readOnly(root, r); err != nil {
			return fmt.Errorf("read-only %s: %w", r, err)
		}
	}
	if err := pivot(p.Rootfs, p.NoPivot); err != nil {
		return err
	}
	if p.RootRO {
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("read-only root: %w", err)
		}
	}
	return nil
}

func doMount(root int, m mountStep) error {
	if m.Bind {
		dst, err := target(root, m.Dst, m.SrcIsDir)
		if err != nil {
			return err
		}
		defer unix.Close(dst)
		if err := bindAt(unix.AT_FDCWD, m.Src, m.Flags&unix.MS_REC != 0, attrsOf(m.Flags), dst); err != nil {
			return err
		}
		return propagate(root, m)
	}
	dst, err := target(root, m.Dst, true)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	if m.Cgroup {
		return mountCgroup(root, m, dst)
	}
	src := m.Src
	if src == "" {
		src = m.Type
	}
	if err := unix.Mount(src, fdPath(dst), m.Type, m.Flags&^unix.MS_REC, m.Data); err != nil {
		return err
	}
	return propagate(root, m)
}

func propagate(root int, m mountStep) error {
	if m.Prop == 0 {
		return nil
	}
	fd, err := openIn(root, m.Dst)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Mount("", fdPath(fd), "", m.Prop, "")
}

// mountCgroup shows the container its own cgroups, read-only: on a v2 host
// its cgroup2 directory, on a hybrid or v1 host a tmpfs holding each
// controller's directory.
func mountCgroup(root int, m mountStep, dst int) error {
	ro := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)
	if len(m.CgroupDirs) == 1 && m.CgroupDirs[0][0] == "" {
		return bindAt(unix.AT_FDCWD, m.CgroupDirs[0][1], false, ro, dst)
	}
	if err := unix.Mount("tmpfs", fdPath(dst), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return err
	}
	for _, d := range m.CgroupDirs {
		fd, err := target(root, m.Dst+"/"+d[0], true)
		if err != nil {
			return err
		}
		err = bindAt(unix.AT_FDCWD, d[1], false, ro, fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	fd, err := openIn(root, m.Dst)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// makeDev binds the default host device nodes into /dev and adds the
// usual links (a tmpfs /dev from config.json gets them all; an image's
// own /dev gets the nodes bound over whatever it holds).
func makeDev(root int, devices []string, tmpfsDev bool) error {
	for _, n := range devices {
		dst, err := target(root, "/dev/"+n, false)
		if err != nil {
			return err
		}
		err = bindAt(unix.AT_FDCWD, "/dev/"+n, false, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, dst)
		unix.Close(dst)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	if !tmpfsDev {
		return nil
	}
	dev, err := openIn(root, "/dev")
	if err != nil {
		return err
	}
	defer unix.Close(dev)
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore"} {
		if err := unix.Symlinkat(to, dev, name); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	if fd, err := openIn(root, "/dev/pts/ptmx"); err == nil {
		unix.Close(fd)
		if err := unix.Symlinkat("pts/ptmx", dev, "ptmx"); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// openExisting opens p below root; -1 and no error when it is missing.
func openExisting(root int, p string) (int, error) {
	fd, err := openIn(root, p)
	if errors.Is(err, unix.ENOENT) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// mask hides p: /dev/null over a file, an empty read-only tmpfs over a
// directory. A missing path is fine.
func mask(root int, p string) error {
	fd, err := openExisting(root, p)
	if fd < 0 {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.Mount("tmpfs", fdPath(fd), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,mode=555")
	}
	return bindAt(unix.AT_FDCWD, "/dev/null", false, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, fd)
}

// readOnly makes the tree at p read-only (a read-only clone over itself).
func readOnly(root int, p string) error {
	fd, err := openExisting(root, p)
	if fd < 0 {
		return err
	}
	defer unix.Close(fd)
	return bindAt(fd, "", true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, fd)
}

// pivot makes rootfs the root and detaches the host's.
func pivot(rootfs string, noPivot bool) error {
	if err := unix.Chdir(rootfs); err != nil {
		return fmt.Errorf("chdir rootfs: %w", err)
	}
	if noPivot {
		if err := unix.Mount(rootfs, "/", "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move root: %w", err)
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("chroot: %w", err)
		}
		return unix.Chdir("/")
	}
	// pivot_root(".", ".") stacks the old root under the new one; it is
	// made a slave (nothing propagates to the host) and detached.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Mount("", ".", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("old root propagation: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// listDir lists the entries of a container directory that Landlock
// rules may go on (directories and regular files; symlinks are reached
// by their targets' own paths).
func listDir(dir string) []dirEntry {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []dirEntry
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		out = append(out, dirEntry{path.Join(dir, e.Name()), e.IsDir()})
	}
	return out
}
