package imageroot

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// Detached makes the overlay of layers (lowest first) under w as a mount
// that is attached nowhere (fsopen/fsmount): the returned file holds it,
// and whoever gets it (a sandbox's init, in its own mount namespace)
// attaches it with move_mount. Made by a root host, the overlay works with
// the host's credentials, so the image's files keep their owners and
// modes whatever the sandbox's uid; and nothing is left mounted on the
// host when the holders are gone. Layers are added one by one
// (lowerdir+, Linux 6.8), so an image of any number of layers fits.
func Detached(layers []string, w *Writable) (*os.File, error) {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("overlay: fsopen: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer unix.Close(fd)
	set := func(k, v string) error {
		if err := unix.FsconfigSetString(fd, k, v); err != nil {
			return fmt.Errorf("overlay: %s=%s: %v%s: %w", k, v, err, fsLog(fd), sandbox.ErrUnavailable)
		}
		return nil
	}
	if err := unix.FsconfigSetFlag(fd, "userxattr"); err != nil {
		return nil, fmt.Errorf("overlay: userxattr: %v: %w", err, sandbox.ErrUnavailable)
	}
	for i := len(layers) - 1; i >= 0; i-- { // topmost first
		if err := set("lowerdir+", layers[i]); err != nil {
			return nil, err
		}
	}
	if err := set("upperdir", w.Upper); err != nil {
		return nil, err
	}
	if err := set("workdir", w.Work); err != nil {
		return nil, err
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return nil, fmt.Errorf("overlay: create: %v%s: %w", err, fsLog(fd), sandbox.ErrUnavailable)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("overlay: fsmount: %v: %w", err, sandbox.ErrUnavailable)
	}
	return os.NewFile(uintptr(mfd), "overlay"), nil
}

// Mapped returns idmapped clones of dirs (open_tree + MOUNT_ATTR_IDMAP
// through userns, a user namespace file): ids stored k appear as the
// namespace's k. A sandbox's init, in that namespace, builds its image
// root from them (Detached with their /proc/self/fd paths): overlayfs
// cannot be idmapped itself but its layers can (Linux 5.19), and made
// inside, its copy-ups carry the sandbox's own credentials, so a file the
// image stores as root belongs to the sandbox's root and what the sandbox
// writes is stored with the ids it has inside, never as host root.
func Mapped(dirs []string, userns *os.File) (_ []*os.File, err error) {
	out := make([]*os.File, 0, len(dirs))
	defer func() {
		if err != nil {
			for _, f := range out {
				f.Close()
			}
		}
	}()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	for _, dir := range dirs {
		fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("image root: clone %s: %v: %w", dir, err, sandbox.ErrUnavailable)
		}
		out = append(out, os.NewFile(uintptr(fd), dir))
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return nil, fmt.Errorf("image root: id-map %s (idmapped mounts: Linux 5.12+, a filesystem that supports them): %v: %w", dir, err, sandbox.ErrUnavailable)
		}
	}
	return out, nil
}

// Attach attaches a detached mount (from Detached, inherited as fd) at
// dst.
func Attach(fd int, dst string) error {
	return unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// fsLog reads what the kernel said about a failed fsconfig (the fs
// context's message log), for the error.
func fsLog(fd int) string {
	buf := make([]byte, 512)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return ""
	}
	return " (" + string(buf[:n]) + ")"
}
