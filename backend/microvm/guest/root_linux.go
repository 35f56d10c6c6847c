package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
)

// Outside the sandbox's root (unreachable once it is entered): the
// overlays' lower and upper layers, injected files, deny sources.
const (
	layersDir = "/layers"
	filesDir  = "/files"
	denyDir   = "/deny-dir"
	denyFile  = "/deny-file"
)

// buildRoot builds the sandbox's root under sandboxRoot: an empty tmpfs
// (read-only once built) holding mount points and top-level links, the 9p
// shares, tmpfs mounts, /proc, a minimal /dev, injected files bound
// read-only, deny mounts over denied paths, the agent binary.
func buildRoot(cfg *bootproto.Config) error {
	if err := rootBase(cfg); err != nil {
		return err
	}
	if err := mountAt("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "", true); err != nil {
		return err
	}
	// The guest's sysctls are the sandbox's kernel settings: read-only.
	if err := bindRO(sandboxRoot+"/proc/sys", "/proc/sys", true); err != nil {
		return fmt.Errorf("/proc/sys read-only: %w", err)
	}
	if err := makeDev(); err != nil {
		return err
	}
	if err := mountAll(cfg.Mounts); err != nil {
		return err
	}
	if err := injectFiles(cfg.Files); err != nil {
		return err
	}
	if err := bindRO("/init", AgentPath, false); err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	if err := denyPaths(cfg.Deny); err != nil {
		return err
	}
	if cfg.Root == nil {
		if err := unix.Mount("", sandboxRoot, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=1m"); err != nil {
			return fmt.Errorf("root read-only: %w", err)
		}
	} else if !cfg.RootWritable {
		if err := unix.Mount("", sandboxRoot, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("root read-only: %w", err)
		}
	}
	return nil
}

// rootBase mounts the root (the image's share under a writable layer, or
// an empty tmpfs) and makes its top-level links.
func rootBase(cfg *bootproto.Config) error {
	if err := os.MkdirAll(sandboxRoot, 0o755); err != nil {
		return err
	}
	if cfg.Root != nil {
		// An image: its share read-only under a writable layer (mount
		// points and the image's own writes stay in the guest).
		if err := overlayShare("root", *cfg.Root, cfg.RootTags, sandboxRoot); err != nil {
			return fmt.Errorf("image root: %w", err)
		}
	} else if err := unix.Mount("root", sandboxRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=1m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	for _, l := range cfg.Links {
		if err := os.Symlink(l.Target, sandboxRoot+l.Path); err != nil {
			return fmt.Errorf("link %s: %w", l.Path, err)
		}
	}
	return nil
}

// mountAll mounts the tmpfs mounts and the shares, in order.
func mountAll(mounts []bootproto.Mount) error {
	for i, m := range mounts {
		if m.Type == "tmpfs" {
			opts := "mode=" + strconv.FormatUint(uint64(m.Mode), 8) + ",uid=" + strconv.Itoa(m.UID) + ",gid=" + strconv.Itoa(m.GID)
			if m.Size > 0 {
				opts += ",size=" + strconv.FormatInt(m.Size, 10)
			}
			if err := mountAt("tmpfs", m.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts, true); err != nil {
				return err
			}
			continue
		}
		if err := mountShare(i, m); err != nil {
			return err
		}
	}
	return nil
}

// injectFiles writes the injected files and binds each read-only at its
// path.
func injectFiles(files []bootproto.File) error {
	if err := os.MkdirAll(filesDir, 0o700); err != nil {
		return err
	}
	for i, f := range files {
		src := filepath.Join(filesDir, strconv.Itoa(i))
		mode := f.Mode & 0o777
		if mode == 0 {
			mode = 0o444
		}
		if err := os.WriteFile(src, f.Data, os.FileMode(mode)); err != nil {
			return err
		}
		if err := bindRO(src, f.Path, false); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	return nil
}

// denyPaths mounts an empty, inaccessible directory or file over each
// denied path that exists.
func denyPaths(deny []bootproto.Deny) error {
	if err := os.Mkdir(denyDir, 0); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.WriteFile(denyFile, nil, 0); err != nil {
		return err
	}
	for _, d := range deny {
		if _, err := os.Lstat(sandboxRoot + d.Path); err != nil {
			continue // nothing there to hide
		}
		src := denyFile
		if d.Dir {
			src = denyDir
		}
		if err := bindRO(src, d.Path, true); err != nil {
			return fmt.Errorf("deny %s: %w", d.Path, err)
		}
	}
	return nil
}

// mountShare mounts one 9p share, or an overlay over it.
func mountShare(i int, m bootproto.Mount) error {
	opts := "trans=virtio,version=9p2000.L,msize=524288,access=client"
	if m.Cache != "" {
		opts += ",cache=" + m.Cache
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !m.Overlay {
		if m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		return mountAt(m.Tag, m.Path, "9p", flags, opts, true)
	}
	if err := overlayShare(strconv.Itoa(i), m, nil, sandboxRoot+m.Path); err != nil {
		return err
	}
	return bindRO(layersDir+"/"+strconv.Itoa(i)+"/rw/upper", LayersDir+"/"+strconv.Itoa(i), true)
}

// overlayShare mounts share m (with tags: each of those layers, lowest
// first, at lower, lower1, ...) read-only at layersDir/name/lower, a tmpfs
// of m.OverlaySize bytes at layersDir/name/rw, and the overlay of both at
// target (a full path; made when missing).
func overlayShare(name string, m bootproto.Mount, tags []string, target string) error {
	opts := "trans=virtio,version=9p2000.L,msize=524288,access=client"
	if m.Cache != "" {
		opts += ",cache=" + m.Cache
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	dir := filepath.Join(layersDir, name)
	lower, rw := dir+"/lower", dir+"/rw"
	if len(tags) == 0 {
		tags = []string{m.Tag}
	}
	// Layers lowest first; overlayfs lists them topmost first.
	lowers := make([]string, len(tags))
	for i, tag := range tags {
		l := lower
		if i > 0 {
			l += strconv.Itoa(i)
		}
		if err := os.MkdirAll(l, 0o700); err != nil {
			return err
		}
		if err := unix.Mount(tag, l, "9p", flags|unix.MS_RDONLY, opts); err != nil {
			return fmt.Errorf("mount %s (%s): %w", m.Path, tag, err)
		}
		lowers[len(tags)-1-i] = l
	}
	if err := os.MkdirAll(rw, 0o700); err != nil {
		return err
	}
	size := ""
	if m.OverlaySize > 0 {
		size = ",size=" + strconv.FormatInt(m.OverlaySize, 10)
	}
	if err := unix.Mount("layer", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=700"+size); err != nil {
		return fmt.Errorf("overlay layer for %s: %w", m.Path, err)
	}
	for _, d := range []string{rw + "/upper", rw + "/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// The upper dir takes the lower root's owner and mode (what the
	// sandbox sees as the top of the share).
	if st, err := os.Stat(lowers[0]); err == nil {
		os.Chmod(rw+"/upper", st.Mode().Perm())
		if s, ok := st.Sys().(*unix.Stat_t); ok {
			os.Lchown(rw+"/upper", int(s.Uid), int(s.Gid))
		}
	}
	o := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + rw + "/upper,workdir=" + rw + "/work,redirect_dir=on"
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", m.Path, err)
	}
	if err := unix.Mount("overlay", target, "overlay", flags, o); err != nil {
		return fmt.Errorf("overlay on %s: %w", m.Path, err)
	}
	return nil
}

// mountAt mounts at path inside the sandbox's root, making the mount point
// (only ever inside the root's tmpfs or a tmpfs: the host made sure that a
// mount point inside a share exists there).
func mountAt(src, path, typ string, flags uintptr, data string, dir bool) error {
	target := sandboxRoot + path
	if dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", path, err)
		}
	}
	if err := unix.Mount(src, target, typ, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", typ, path, err)
	}
	return nil
}

// bindRO binds src read-only over path inside the root (a file or
// directory like src, created when missing); noexec for deny mounts.
func bindRO(src, path string, noexec bool) error {
	target := sandboxRoot + path
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if st.IsDir() {
			err = os.Mkdir(target, 0o755)
		} else {
			err = os.WriteFile(target, nil, 0o444)
		}
		if err != nil {
			return err
		}
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if noexec {
		flags |= unix.MS_NOEXEC
	}
	return unix.Mount("", target, "", flags, "")
}

// makeDev makes a minimal /dev: the usual character devices, a private
// devpts, /dev/shm comes from the plan's tmpfs. No disk, no virtio port,
// no /dev/mem: the guest's devtmpfs stays outside.
func makeDev() error {
	if err := mountAt("dev", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k", true); err != nil {
		return err
	}
	dev := sandboxRoot + "/dev"
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		if err := unix.Mknod(dev+"/"+d.name, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", d.name, err)
		}
		os.Chmod(dev+"/"+d.name, 0o666)
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	return nil
}
