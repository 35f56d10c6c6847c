package objstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
)

// fileOwner returns fi's owner relative to base.
func fileOwner(fi fs.FileInfo, base Owner) (int, int) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return int(st.Uid) - base.UID, int(st.Gid) - base.GID
}

// RestoreTree makes dst (which must not exist) the tree m describes, its
// files copied from store (by the kernel: a reflink where the filesystem
// has them) and owned by base's range. The caller verified the store.
// Nothing runs in dst meanwhile (the sandbox is stopped).
func RestoreTree(ctx context.Context, m *Manifest, store *Store, dst string, base Owner) error {
	sc := NewScan(ctx, "restore", Version)
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	// Everything is made through dst's os.Root (nothing resolves out of
	// it), and an entry's parent must be a directory this restore made: a
	// manifest naming a symlink and then entries "below" it is refused
	// rather than followed.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	dirs := map[string]bool{".": true}
	for _, e := range m.Entries {
		if !filepath.IsLocal(e.Path) || !dirs[path.Dir(e.Path)] {
			return Corrupt("restore: entry %q leaves the workspace or is not under a directory of the checkpoint", e.Path)
		}
		p := filepath.FromSlash(e.Path)
		var err error
		switch e.Kind {
		case "dir":
			err = root.Mkdir(p, 0o700)
			dirs[e.Path] = true
		case "symlink":
			err = root.Symlink(e.Target, p)
		case "file":
			err = copyObject(store.path(e.SHA256), root, p, sc)
		default:
			err = Corrupt("restore: entry %q: unknown kind %q", e.Path, e.Kind)
		}
		if err == nil {
			err = root.Lchown(p, base.UID+e.UID, base.GID+e.GID)
		}
		if err == nil && e.Kind == "file" {
			err = root.Chmod(p, fs.FileMode(e.Mode)) // after chown, which clears set-id bits
		}
		if err != nil {
			return fmt.Errorf("restore %q: %w", e.Path, err)
		}
	}
	// Directory modes last, deepest first: a read-only directory must not
	// stop its own entries from being made.
	for _, e := range slices.Backward(m.Entries) {
		if e.Kind == "dir" {
			if err := root.Chmod(filepath.FromSlash(e.Path), fs.FileMode(e.Mode)); err != nil {
				return fmt.Errorf("restore %q: %w", e.Path, err)
			}
		}
	}
	return nil
}

// copyObject copies the stored object src to name in root (new), by its
// data blocks: a sparse file stays sparse.
func copyObject(src string, root *os.Root, name string, sc *Scan) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := copySparse(out, in, fi.Size(), sc); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ShiftOwner moves every entry of dir owned by ids of the range at from
// (Size wide) to the same ids of the range at to: a resumed sandbox runs
// as the host id range it leased this time, its files were the last
// one's. Modes are kept (chown clears set-id bits). Nothing runs as
// either range meanwhile but the resumed sandbox's idle init.
func ShiftOwner(dir string, from, to Owner, width int) error {
	if from == to {
		return nil
	}
	in := func(id, base int) bool { return id >= base && id < base+width }
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid := int(st.Uid), int(st.Gid)
		nu, ng := -1, -1
		if in(uid, from.UID) {
			nu = uid - from.UID + to.UID
		}
		if in(gid, from.GID) {
			ng = gid - from.GID + to.GID
		}
		if nu < 0 && ng < 0 {
			return nil
		}
		if err := os.Lchown(p, nu, ng); err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 && fi.Mode()&fs.ModeSymlink == 0 {
			return os.Chmod(p, fi.Mode()&modeBits)
		}
		return nil
	})
}

// oNoFollow opens a file itself, never a symlink's target, and never
// blocks (a sandbox may swap a file for a fifo while it is read).
const oNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
