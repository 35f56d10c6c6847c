package agent

import (
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// rootFS resolves paths inside one directory. It uses openat2 with
// RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS: symlinks resolve as if the root
// were "/", ".." stops at it, and /proc/<pid>/root-style magic links are
// refused, so no path can leave the root, even when the root is "/" of a
// sandbox whose /proc shows other roots. Where openat2 is missing (old
// kernels, some user-space kernels) it walks the path one component at a
// time with O_NOFOLLOW and refuses symlinks anywhere in the path.
type rootFS struct {
	fd int
}

// noOpenat2 is set once openat2 turned out to be unavailable.
var noOpenat2 atomic.Bool

func openRoot(p string) (*rootFS, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errnoKind(err)
	}
	return &rootFS{fd: fd}, nil
}

func (r *rootFS) close() { unix.Close(r.fd) }

// rel turns a checked absolute path into one relative to the root.
func rel(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// open opens p (absolute, clean) inside the root.
func (r *rootFS) open(p string, flags int, mode uint32) (int, error) {
	if err := checkPath(p); err != nil {
		return -1, err
	}
	flags |= unix.O_CLOEXEC
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		}
		if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
			how.Mode = uint64(mode)
		}
		for i := 0; ; i++ {
			fd, err := unix.Openat2(r.fd, rel(p), &how)
			if err == nil {
				return fd, nil
			}
			if err == unix.EAGAIN && i < 16 {
				continue // a concurrent rename raced the resolution
			}
			if err == unix.ENOSYS {
				noOpenat2.Store(true)
				break
			}
			return -1, errnoKind(err)
		}
	}
	return r.walk(p, flags, mode)
}

// walk is the openat2-less resolver: every component is opened with
// O_NOFOLLOW relative to the previous one; a symlink anywhere is refused.
func (r *rootFS) walk(p string, flags int, mode uint32) (int, error) {
	cur, err := unix.Openat(r.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errnoKind(err)
	}
	if p == "/" {
		unix.Close(cur)
		return unix.Openat(r.fd, ".", flags, mode)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		last := i == len(parts)-1
		f, m := unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(0)
		if last {
			f, m = flags|unix.O_NOFOLLOW, mode
		}
		next, err := unix.Openat(cur, part, f, m)
		unix.Close(cur)
		if err != nil {
			if err == unix.ELOOP || (err == unix.ENOTDIR && !last) {
				return -1, fmt.Errorf("symlink in %q refused (no openat2): %w", p, sandbox.ErrPermission)
			}
			return -1, errnoKind(err)
		}
		cur = next
	}
	return cur, nil
}

// parent opens the directory containing p and returns its base name. The
// base itself is not resolved: callers use *at calls that do not follow it.
func (r *rootFS) parent(p string) (int, string, error) {
	if err := checkPath(p); err != nil {
		return -1, "", err
	}
	if p == "/" {
		return -1, "", fmt.Errorf("the root directory has no parent: %w", sandbox.ErrInvalid)
	}
	fd, err := r.open(path.Dir(p), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	return fd, path.Base(p), nil
}
