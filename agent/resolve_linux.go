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
// kernels, some user-space kernels) walk emulates the same semantics.
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

// maxSymlinks bounds symlink expansions in one resolution (as the kernel's 40).
const maxSymlinks = 40

// walk is the openat2-less resolver. It emulates RESOLVE_IN_ROOT in user
// space: every component is looked at with AT_SYMLINK_NOFOLLOW and opened
// with O_NOFOLLOW relative to the previous directory; a symlink is read and
// its target resolved by the same walk (an absolute target from the root,
// ".." never above the root), so the kernel never follows a link itself and
// magic links are only ever read as text.
func (r *rootFS) walk(p string, flags int, mode uint32) (int, error) {
	root, err := unix.Openat(r.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errnoKind(err)
	}
	stack := []int{root} // directory descriptors, stack[0] is the root
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(strings.TrimPrefix(p, "/"), "/")
	links := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		switch comp {
		case "", ".":
			if len(todo) == 0 {
				return openDot(stack[len(stack)-1], flags)
			}
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			if len(todo) == 0 {
				return openDot(stack[len(stack)-1], flags)
			}
			continue
		}
		cur := stack[len(stack)-1]
		var st unix.Stat_t
		err := unix.Fstatat(cur, comp, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if links++; links > maxSymlinks {
				return -1, errnoKind(unix.ELOOP)
			}
			target, err := readLinkAt(cur, comp)
			if err != nil {
				return -1, err
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if err != nil && !(err == unix.ENOENT && len(todo) == 0 && flags&unix.O_CREAT != 0) {
			return -1, errnoKind(err)
		}
		if len(todo) == 0 {
			return openLast(cur, comp, flags, mode, p)
		}
		next, err := openDirStep(cur, comp, p)
		if err != nil {
			return -1, err
		}
		stack = append(stack, next)
	}
	return openDot(stack[len(stack)-1], flags)
}

// readLinkAt reads symlink comp in directory dir.
func readLinkAt(dir int, comp string) (string, error) {
	buf := make([]byte, MaxPathLen)
	n, err := unix.Readlinkat(dir, comp, buf)
	if err != nil {
		return "", errnoKind(err)
	}
	return string(buf[:n]), nil
}

// openLast opens the walk's last component comp in dir with the caller's
// flags, never following a symlink (p is the whole path, for errors).
func openLast(dir int, comp string, flags int, mode uint32, p string) (int, error) {
	fd, err := unix.Openat(dir, comp, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return -1, errnoKind(err)
	}
	if flags&unix.O_PATH != 0 {
		// O_PATH|O_NOFOLLOW opens a symlink swapped in meanwhile.
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return -1, fmt.Errorf("%s changed during resolution: %w", p, sandbox.ErrInvalid)
		}
	}
	return fd, nil
}

// openDirStep opens directory comp in dir (O_PATH, not following a
// symlink) and checks it is still a directory.
func openDirStep(dir int, comp string, p string) (int, error) {
	next, err := unix.Openat(dir, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errnoKind(err)
	}
	var nst unix.Stat_t
	if unix.Fstat(next, &nst) != nil || nst.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(next)
		return -1, fmt.Errorf("%s changed during resolution: %w", p, sandbox.ErrInvalid)
	}
	return next, nil
}

// openDot reopens a directory reached by the walk with the caller's flags.
func openDot(dir int, flags int) (int, error) {
	if flags&unix.O_CREAT != 0 {
		return -1, fmt.Errorf("is a directory: %w", sandbox.ErrInvalid)
	}
	fd, err := unix.Openat(dir, ".", flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errnoKind(err)
	}
	return fd, nil
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
