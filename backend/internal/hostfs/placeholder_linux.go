package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CreatePlaceholders creates the pending placeholders (ProtectConfig's)
// below the workspace ws; it returns those made even on error, for removal.
func CreatePlaceholders(ws string, pending []string) ([]Placeholder, error) {
	var ph []Placeholder
	for _, p := range pending {
		made, err := makePlaceholder(ws, p, ph)
		if err != nil {
			return ph, fmt.Errorf("protect %s: create placeholder: %w", p, err)
		}
		ph = append(ph, made)
	}
	return ph, nil
}

// makePlaceholder creates an empty file at p, resolving p beneath ws
// without following any symlink (a link planted in the workspace by an
// earlier sandbox must not make the host create files elsewhere): a hard
// link to the first placeholder when there is one, else a new file.
func makePlaceholder(ws, p string, made []Placeholder) (Placeholder, error) {
	rel, err := filepath.Rel(ws, filepath.Dir(p))
	if err != nil {
		return Placeholder{}, err
	}
	parent, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return Placeholder{}, &fs.PathError{Op: "open", Path: ws, Err: err}
	}
	if rel != "." {
		sub, err := unix.Openat2(parent, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		unix.Close(parent)
		if err != nil {
			return Placeholder{}, &fs.PathError{Op: "open", Path: filepath.Dir(p), Err: err}
		}
		parent = sub
	}
	defer unix.Close(parent)
	base := filepath.Base(p)
	if len(made) > 0 {
		if err := unix.Linkat(unix.AT_FDCWD, made[0].Path, parent, base, 0); err == nil {
			var st unix.Stat_t
			if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Ino == made[0].Ino && st.Dev == made[0].Dev {
				return Placeholder{Path: p, Dev: st.Dev, Ino: st.Ino}, nil
			}
			// Not our inode (the first placeholder was swapped): undo.
			unix.Unlinkat(parent, base, 0)
			return Placeholder{}, &fs.PathError{Op: "link", Path: p, Err: unix.EXDEV}
		}
	}
	fd, err := unix.Openat(parent, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return Placeholder{}, &fs.PathError{Op: "create", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Unlinkat(parent, base, 0)
		return Placeholder{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return Placeholder{Path: p, Dev: st.Dev, Ino: st.Ino}, nil
}

// RemovePlaceholders removes, newest first, the placeholders that are still
// ours: the same inode, still an empty regular file (nothing else may have
// been put there meanwhile).
func RemovePlaceholders(ph []Placeholder) error {
	var errs []error
	for i := len(ph) - 1; i >= 0; i-- {
		p := ph[i]
		var st unix.Stat_t
		if err := unix.Lstat(p.Path, &st); err != nil {
			continue
		}
		if st.Dev != p.Dev || st.Ino != p.Ino || st.Size != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := unix.Unlink(p.Path); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, &fs.PathError{Op: "remove placeholder", Path: p.Path, Err: err})
		}
	}
	return errors.Join(errs...)
}
