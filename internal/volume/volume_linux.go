package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// mkfs finds mkfs.ext4 (e2fsprogs; often in sbin, which a service's PATH
// may lack).
func mkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("mkfs.ext4 not found (install e2fsprogs): %w", errdefs.ErrUnavailable)
}

// Available says why volumes cannot be made on this host, or "".
func Available() string {
	if os.Geteuid() != 0 {
		return "disk quotas need root (loop devices and mounts)"
	}
	if _, err := mkfs(); err != nil {
		return err.Error()
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no /dev/loop-control (loop devices)"
	}
	return ""
}

// Create makes an image of size bytes at image (which must not exist),
// with its root directory owned by uid:gid, and mounts it at dir (made
// if missing). On error nothing is left.
func Create(ctx context.Context, image, dir string, size int64, uid, gid int) (_ *Volume, err error) {
	if err := checkSize(size); err != nil {
		return nil, err
	}
	bin, err := mkfs()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	defer func() {
		if err != nil {
			os.Remove(image)
		}
	}()
	// Sparse: the image takes the disk its contents take.
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	// No reserved blocks, lazy metadata init (the fastest mkfs), no
	// discard of a fresh sparse file, and the root the sandbox's.
	cmd := exec.CommandContext(ctx, bin, "-q", "-F", "-m", "0", "-L", "airlock",
		"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=%d:%d", uid, gid), image)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("volume %s: mkfs.ext4: %v: %s: %w", image, err, strings.TrimSpace(string(out)), errdefs.ErrUnavailable)
	}
	v, err := Attach(image, dir)
	if err != nil {
		return nil, err
	}
	// Nothing of ours in the sandbox's files: mkfs's lost+found goes
	// (fsck makes it again when it needs it).
	if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		v.Close()
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	return v, nil
}

// attachWait bounds how long Attach waits for an earlier mount of the
// same image to be gone.
const attachWait = 5 * time.Second

// Attach mounts an existing image at dir (made if missing): after a
// restart, the sandbox's files are all there.
func Attach(image, dir string) (*Volume, error) {
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	defer img.Close()
	fi, err := img.Stat()
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	// Never mounted twice: an image that still backs a loop device (a
	// lazy unmount whose holder has not let go) would be a second ext4
	// mount of the same blocks, stale and corrupting (issue 24 item 14).
	// Callers that may wait do (WaitFree) before.
	// The kernel lets an autoclear loop device go a moment after the
	// unmount: a short wait, then a clear refusal.
	if err := WaitFree(image, attachWait); err != nil {
		return nil, fmt.Errorf("volume %s: not mounted again while an earlier mount lives: %w", image, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume %s: mount point: %w", image, err)
	}
	loop, err := attachLoop(img)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	defer loop.Close()
	// nosuid and nodev: nothing in a sandbox's files is ever a set-id
	// program or a device to the host. The loop device is detached by
	// the kernel when this mount goes (autoclear).
	if err := unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, ""); err != nil {
		return nil, fmt.Errorf("volume %s: mount on %s: %v: %w", image, dir, err, errdefs.ErrUnavailable)
	}
	return &Volume{Image: image, Dir: dir, Size: fi.Size()}, nil
}

// attachLoop binds img to a free loop device, autoclear set.
func attachLoop(img *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("loop control: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer ctl.Close()
	for try := 0; try < 20; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("free loop device: %v: %w", err, errdefs.ErrUnavailable)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("loop device %d: %v: %w", n, err, errdefs.ErrUnavailable)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("loop device %d: %v: %w", n, err, errdefs.ErrUnavailable)
		}
		// Another process took the same free device: take the next.
		time.Sleep(time.Millisecond)
	}
	return nil, fmt.Errorf("no loop device could be had: %w", errdefs.ErrUnavailable)
}

// closeWait bounds how long Close waits, after its unmount, for the
// kernel to let go of the image.
const closeWait = 30 * time.Second

// Close writes what is in the volume to its image, unmounts it and
// returns once no mount of it is left anywhere (its loop device gone):
// then the image is complete and Attach may mount it again at once. When
// another mount of it lives on past closeWait (a copy in another mount
// namespace, a file open in a lazily detached mount) it returns ErrHeld
// naming the holders: the data is on the image, the image is not free.
// The image stays (Remove deletes it). Idempotent.
func (v *Volume) Close() error { return v.Detach(closeWait) }

// Detach is Close with its own bound on the wait for the holders.
func (v *Volume) Detach(wait time.Duration) error {
	if err := unmount(v.Dir); err != nil {
		return err
	}
	if err := WaitFree(v.Image, wait); err != nil {
		return fmt.Errorf("unmounted here, its data on the image, yet: %w", err)
	}
	return nil
}

// Remove unmounts (if mounted) and deletes the volume and its mount point,
// without waiting for other holders: what they hold is being deleted.
func (v *Volume) Remove() error {
	err := unmount(v.Dir)
	if rerr := os.Remove(v.Image); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("volume %s: %w", v.Image, rerr)
	}
	if rerr := os.Remove(v.Dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("volume %s: %w", v.Dir, rerr)
	}
	return err
}

// unmount writes the filesystem mounted at dir to its device, then
// unmounts it. The sync comes first, always: an unmount here succeeds
// while a copy of the mount lives in another mount namespace, and then
// the kernel writes nothing back until that copy goes, so "unmounted"
// alone never meant "on the image" (issue 24 item 14).
func unmount(dir string) error {
	if err := syncMounted(dir); err != nil {
		return fmt.Errorf("unmount %s: sync: %w", dir, err)
	}
	err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil // unmounted now, or not a mount point (any more)
	case errors.Is(err, unix.EBUSY):
		// Something in this namespace still holds it (a process about
		// to die, a file open in it): what was written until now is on
		// the image (synced above); detach it from the tree; the kernel
		// finishes when the holder lets go, and until then Attach
		// refuses the image.
		if err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		return nil
	}
	return fmt.Errorf("unmount %s: %w", dir, err)
}

// syncMounted syncs the filesystem mounted at dir, if dir is a mount
// point (another device than its parent's): never the parent's.
func syncMounted(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil // nothing there to sync
	}
	defer unix.Close(fd)
	var st, parent unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Stat(filepath.Dir(dir), &parent) != nil || st.Dev == parent.Dev {
		return nil
	}
	return unix.Syncfs(fd)
}

// Sweep unmounts every mount at or below root (deepest first): what a
// crashed server left. It touches no other mount.
func Sweep(root string) error {
	root = filepath.Clean(root)
	mounts, err := mountinfo.Self()
	if err != nil {
		return fmt.Errorf("sweep volumes: %w", err)
	}
	var mps []string
	for _, m := range mounts {
		if m.Under(root) {
			mps = append(mps, m.Point)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	var errs []error
	for _, mp := range mps {
		if err := unmount(mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
