package wasm

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"

	"github.com/airlock-dev/airlock/policy"
)

// rootFS is the WASI view of one preopened directory for one process.
// Every operation goes through the mount's os.Root, so a guest path with
// ".." or a symbolic link that leads out of the directory fails (EPERM)
// instead of reaching the host; wazero's own DirFS follows such links,
// which is why it is not used. The mount's rules (deny, protect_config,
// disk quota) and the process's open-file budget apply on top.
type rootFS struct {
	experimentalsys.UnimplementedFS
	m   *mount
	fds *fdBudget
}

var _ experimentalsys.FS = (*rootFS)(nil)

// rel turns a guest path relative to the preopen into the path given to
// os.Root and checks the rules for access a.
func (r *rootFS) rel(p string, a access) (string, experimentalsys.Errno) {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		p = "."
	}
	if a != accessRead && r.m.readOnly {
		return "", experimentalsys.EROFS
	}
	return p, r.m.rules.check(r.m.root, p, a)
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
	var e experimentalsys.Errno
	if errors.As(err, &e) {
		return e
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
	a := accessRead
	if flag&writeFlags != 0 {
		a = accessWrite
	}
	rel, e := r.rel(p, a)
	if e != 0 {
		return nil, e
	}
	rules := &r.m.rules
	if a == accessWrite && rules.guard != nil {
		// The guard's decision and the open (which may create) happen
		// under its lock.
		rules.mu.Lock()
		defer rules.mu.Unlock()
		if e := rules.decide(r.m.root, rel, writeOp(r.m.root, rel)); e != 0 {
			return nil, e
		}
	}
	if a == accessWrite && flag&experimentalsys.O_CREAT != 0 && rules.active(a) {
		// Creating through a symlink could create a protected file before
		// the opened file can be checked: refuse it.
		if fi, err := r.m.root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, experimentalsys.EPERM
		}
	}
	f := osOpenFlags(flag, rules.active(a))
	if !r.fds.acquire() {
		return nil, errTooManyFiles
	}
	var before int64
	if r.m.quota != nil && flag&experimentalsys.O_TRUNC != 0 {
		if fi, err := r.m.root.Stat(rel); err == nil && fi.Mode().IsRegular() {
			before = fi.Size()
		}
	}
	file, err := r.m.root.OpenFile(rel, f, perm)
	if err != nil {
		r.fds.release()
		return nil, errno(err)
	}
	fail := func(e experimentalsys.Errno) (experimentalsys.File, experimentalsys.Errno) {
		file.Close()
		r.fds.release()
		return nil, e
	}
	if e := rules.checkOpened(r.m.root, file, a); e != 0 {
		return fail(e)
	}
	if flag&experimentalsys.O_DIRECTORY != 0 {
		if st, err := file.Stat(); err != nil || !st.IsDir() {
			return fail(experimentalsys.ENOTDIR)
		}
	}
	if flag&experimentalsys.O_TRUNC != 0 {
		if err := file.Truncate(0); err != nil {
			return fail(errno(err))
		}
		r.m.quota.give(before)
	}
	rf, e := newRootFile(r.m.root, rel, file, flag&experimentalsys.O_APPEND != 0)
	if e != 0 {
		r.fds.release()
		return nil, e
	}
	rf.quota, rf.fds = r.m.quota, r.fds
	return rf, 0
}

// osOpenFlags are the os.OpenFile flags of a WASI open. With checked (a
// guarded or protected write) O_TRUNC is left out: the caller truncates
// once it checked the opened file.
func osOpenFlags(flag experimentalsys.Oflag, checked bool) int {
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
		if checked {
			// Truncating is a write: check the target before the open
			// does it.
			f &^= os.O_TRUNC
		}
	}
	if flag&experimentalsys.O_APPEND != 0 {
		f |= os.O_APPEND
	}
	if flag&(experimentalsys.O_SYNC|experimentalsys.O_DSYNC|experimentalsys.O_RSYNC) != 0 {
		f |= os.O_SYNC
	}
	f = platformOflags(flag, f)
	return f
}

func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	rel, e := r.rel(p, accessRead)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	fi, err := r.m.root.Lstat(rel)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	rel, e := r.rel(p, accessRead)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	fi, err := r.m.root.Stat(rel)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// mutating runs op on p's relative path after the checks for access a.
func (r *rootFS) mutating(p string, a access, op func(rel string) error) experimentalsys.Errno {
	rel, e := r.rel(p, a)
	if e != 0 {
		return e
	}
	return errno(op(rel))
}

func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	return r.mutating(p, accessWrite, func(rel string) error {
		return r.m.rules.guarded(r.m.root, rel, policy.OpMkdir, func() error { return r.m.root.Mkdir(rel, perm) })
	})
}

func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if perm&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return experimentalsys.EPERM
	}
	return r.mutating(p, accessWrite, func(rel string) error {
		if perm&0o111 == 0 {
			return r.m.root.Chmod(rel, perm)
		}
		return r.m.rules.guarded(r.m.root, rel, policy.OpChmodExec, func() error { return r.m.root.Chmod(rel, perm) })
	})
}

func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	toRel, e := r.rel(to, accessWrite)
	if e != 0 {
		return e
	}
	return r.mutating(from, accessRemove, func(rel string) error {
		fi, err := r.m.root.Lstat(rel)
		if err != nil {
			return err
		}
		return r.m.rules.guardedRename(r.m.root, rel, toRel, fi, func() error { return r.m.root.Rename(rel, toRel) })
	})
}

// removed credits the quota with a file about to be removed.
func (r *rootFS) removed(fi fs.FileInfo) {
	if r.m.quota != nil && fi.Mode().IsRegular() && sys.NewStat_t(fi).Nlink <= 1 {
		r.m.quota.give(fi.Size())
	}
}

func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	return r.mutating(p, accessRemove, func(rel string) error {
		fi, err := r.m.root.Lstat(rel)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return experimentalsys.ENOTDIR
		}
		return r.m.root.Remove(rel)
	})
}

func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	return r.mutating(p, accessRemove, func(rel string) error {
		fi, err := r.m.root.Lstat(rel)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return experimentalsys.EISDIR
		}
		if err := r.m.root.Remove(rel); err != nil {
			return err
		}
		r.removed(fi)
		return nil
	})
}

// Link refuses links from protected files (a hard link is an alias the
// rules would not see by name) and to protected names.
func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	oldRel, e := r.rel(oldPath, accessWrite)
	if e != 0 {
		return e
	}
	return r.mutating(newPath, accessWrite, func(rel string) error {
		op := policy.OpLink
		if fi, err := r.m.root.Lstat(oldRel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			op = policy.OpSymlink
		}
		return r.m.rules.guarded(r.m.root, oldRel, policy.OpLinkSource, func() error {
			if e := r.m.rules.decide(r.m.root, rel, op); e != 0 {
				return e
			}
			return r.m.root.Link(oldRel, rel)
		})
	})
}

// Symlink creates a link with any target text; following it is still
// confined to the root and checked against the rules.
func (r *rootFS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	return r.mutating(linkName, accessWrite, func(rel string) error {
		return r.m.rules.guarded(r.m.root, rel, policy.OpSymlink, func() error { return r.m.root.Symlink(oldPath, rel) })
	})
}

func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	rel, e := r.rel(p, accessRead)
	if e != 0 {
		return "", e
	}
	s, err := r.m.root.Readlink(rel)
	return s, errno(err)
}

func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	return r.mutating(p, accessWrite, func(rel string) error {
		if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
			fi, err := r.m.root.Stat(rel)
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
		return r.m.root.Chtimes(rel, time.Unix(0, atim), time.Unix(0, mtim))
	})
}
