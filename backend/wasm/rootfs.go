package wasm

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// rootFS is the WASI view of one preopened directory. Every operation goes
// through an os.Root, so a guest path with ".." or a symbolic link that
// leads out of the directory fails (EPERM) instead of reaching the host.
// wazero's own DirFS follows such paths, which is why it is not used.
type rootFS struct {
	experimentalsys.UnimplementedFS
	root     *os.Root
	readOnly bool
	// deny holds cleaned paths relative to root that the policy denies.
	deny []string
}

var _ experimentalsys.FS = (*rootFS)(nil)

// rel turns a guest path relative to the preopen into the path given to
// os.Root, refusing denied paths. It returns an errno on refusal.
func (r *rootFS) rel(p string) (string, experimentalsys.Errno) {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		p = "."
	}
	if denied(r.deny, path.Clean(p)) {
		return "", experimentalsys.EACCES
	}
	return p, 0
}

// denied reports whether clean (a cleaned relative path) is one of deny or
// inside one.
func denied(deny []string, clean string) bool {
	for _, d := range deny {
		if d == "." || clean == d || strings.HasPrefix(clean, d+"/") {
			return true
		}
	}
	return false
}

// errno maps an os.Root error to a WASI errno. Escapes out of the root
// become EPERM: the guest learns nothing about what lies outside.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	if isEscape(err) {
		return experimentalsys.EPERM
	}
	return experimentalsys.UnwrapOSError(err)
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root. The standard library has no exported sentinel for it.
func isEscape(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_CREAT |
	experimentalsys.O_TRUNC | experimentalsys.O_APPEND

func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	rel, e := r.rel(p)
	if e != 0 {
		return nil, e
	}
	if r.readOnly && flag&writeFlags != 0 {
		return nil, experimentalsys.EROFS
	}
	f := 0
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		f = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		f = os.O_WRONLY
	}
	if flag&experimentalsys.O_CREAT != 0 {
		f |= os.O_CREATE
	}
	if flag&experimentalsys.O_EXCL != 0 {
		f |= os.O_EXCL
	}
	if flag&experimentalsys.O_TRUNC != 0 {
		f |= os.O_TRUNC
	}
	if flag&experimentalsys.O_APPEND != 0 {
		f |= os.O_APPEND
	}
	if flag&(experimentalsys.O_SYNC|experimentalsys.O_DSYNC|experimentalsys.O_RSYNC) != 0 {
		f |= os.O_SYNC
	}
	f = platformOflags(flag, f)
	file, err := r.root.OpenFile(rel, f, perm)
	if err != nil {
		return nil, errno(err)
	}
	if flag&experimentalsys.O_DIRECTORY != 0 {
		if st, err := file.Stat(); err != nil || !st.IsDir() {
			file.Close()
			return nil, experimentalsys.ENOTDIR
		}
	}
	return newRootFile(r.root, rel, file, flag&experimentalsys.O_APPEND != 0)
}

func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	rel, e := r.rel(p)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	fi, err := r.root.Lstat(rel)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	rel, e := r.rel(p)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	fi, err := r.root.Stat(rel)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// mutating runs op on p's relative path unless the mount is read-only.
func (r *rootFS) mutating(p string, op func(rel string) error) experimentalsys.Errno {
	rel, e := r.rel(p)
	if e != 0 {
		return e
	}
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return errno(op(rel))
}

func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	return r.mutating(p, func(rel string) error { return r.root.Mkdir(rel, perm) })
}

func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	return r.mutating(p, func(rel string) error { return r.root.Chmod(rel, perm) })
}

func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	toRel, e := r.rel(to)
	if e != 0 {
		return e
	}
	return r.mutating(from, func(rel string) error { return r.root.Rename(rel, toRel) })
}

func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	return r.mutating(p, func(rel string) error {
		fi, err := r.root.Lstat(rel)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &os.PathError{Op: "rmdir", Path: rel, Err: experimentalsys.ENOTDIR}
		}
		return r.root.Remove(rel)
	})
}

func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	return r.mutating(p, func(rel string) error {
		fi, err := r.root.Lstat(rel)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return &os.PathError{Op: "unlink", Path: rel, Err: experimentalsys.EISDIR}
		}
		return r.root.Remove(rel)
	})
}

func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	oldRel, e := r.rel(oldPath)
	if e != 0 {
		return e
	}
	return r.mutating(newPath, func(rel string) error { return r.root.Link(oldRel, rel) })
}

// Symlink creates a link with any target text; following it is still
// confined to the root, so a link pointing out of it is harmless.
func (r *rootFS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	return r.mutating(linkName, func(rel string) error { return r.root.Symlink(oldPath, rel) })
}

func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	rel, e := r.rel(p)
	if e != 0 {
		return "", e
	}
	s, err := r.root.Readlink(rel)
	return s, errno(err)
}

func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	return r.mutating(p, func(rel string) error {
		if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
			fi, err := r.root.Stat(rel)
			if err != nil {
				return err
			}
			st := sys.NewStat_t(fi)
			if atim == experimentalsys.UTIME_OMIT {
				atim = st.Atim
			}
			if mtim == experimentalsys.UTIME_OMIT {
				mtim = st.Mtim
			}
		}
		return r.root.Chtimes(rel, time.Unix(0, atim), time.Unix(0, mtim))
	})
}
