package fsguard

import (
	"errors"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/policy"
)

type policyDir = policy.GuardDir

// errResolve means the mediator cannot say where a path lands (a magic
// link, a deleted directory, an fd that is no directory, a trailing slash):
// the kernel decides instead, under the sandbox's Landlock domain.
var errResolve = errors.New("cannot resolve")

// maxLinks bounds symlink expansion, as the kernel's 40.
const maxLinks = 40

// entry is a resolved directory entry: the directory, held open, and the
// entry's name in it. The directory cannot be swapped under us; the
// mediator is the only one creating or renaming entries in mediated
// mounts, one call at a time.
type entry struct {
	dir  *dirRef
	name string
}

func (e entry) close() { e.dir.close() }

// dirRef is an open directory with its canonical path inside the sandbox.
type dirRef struct {
	fd   int
	path string
	mnt  uint64
}

func (d *dirRef) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// openDir opens dir (absolute inside the sandbox) from root with the
// kernel's own resolution confined to the root: symlinks resolve inside,
// ".." stops at the root, magic links are refused.
func openDir(root int, dir string, extra uint64) (*dirRef, error) {
	rel := strings.TrimLeft(dir, "/")
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | extra,
	}
	var fd int
	var err error
	for i := 0; i < 8; i++ {
		fd, err = unix.Openat2(root, rel, &how)
		if err != unix.EAGAIN && err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return describe(fd)
}

// describe fills in a directory's canonical path (the kernel's, seen from
// outside the sandbox's mount namespace: relative to its root) and mount.
func describe(fd int) (*dirRef, error) {
	d := &dirRef{fd: fd}
	p, err := readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		unix.Close(fd)
		return nil, errResolve
	}
	d.path = p
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		unix.Close(fd)
		return nil, err
	}
	d.mnt = stx.Mnt_id
	return d, nil
}

// lookup resolves abs (absolute inside the root, as the caller would see
// it) to its parent directory and final name. With follow, a final
// symlink is followed (inside the root) until the entry is none.
func lookup(root int, abs string, follow bool, extra uint64) (entry, error) {
	for links := 0; ; links++ {
		if links > maxLinks {
			return entry{}, unix.ELOOP
		}
		i := strings.LastIndexByte(abs, '/')
		if i < 0 {
			return entry{}, errResolve
		}
		dirPart, name := abs[:i], abs[i+1:]
		if name == "" || name == "." || name == ".." {
			return entry{}, errResolve
		}
		d, err := openDir(root, dirPart, extra)
		if err != nil {
			if err == unix.ELOOP || err == unix.EXDEV {
				return entry{}, errResolve // a magic link, or a NO_XDEV refusal: the kernel decides
			}
			return entry{}, err
		}
		if !follow {
			return entry{d, name}, nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return entry{d, name}, nil
		}
		if extra&unix.RESOLVE_NO_SYMLINKS != 0 {
			d.close()
			return entry{}, unix.ELOOP
		}
		target, err := readlinkat(d.fd, name)
		d.close()
		if err != nil {
			return entry{}, err
		}
		if !strings.HasPrefix(target, "/") {
			target = d.path + "/" + target
		}
		abs = target
	}
}

// absolute turns a path the caller gave relative to dirfd (or its working
// directory) into an absolute path inside the sandbox. The base is the
// kernel's current name of that directory.
func absolute(tid uint32, dirfd int32, p string) (string, error) {
	if p == "" {
		return "", errResolve
	}
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	link := "/proc/" + strconv.FormatUint(uint64(tid), 10) + "/cwd"
	if dirfd != unix.AT_FDCWD {
		if dirfd < 0 {
			return "", unix.EBADF
		}
		link = "/proc/" + strconv.FormatUint(uint64(tid), 10) + "/fd/" + strconv.Itoa(int(dirfd))
	}
	var base string
	err := asTracer(func() (err error) {
		base, err = readlink(link)
		return err
	})
	if err != nil {
		if err == unix.ENOENT && dirfd != unix.AT_FDCWD {
			return "", unix.EBADF
		}
		return "", errResolve
	}
	if !strings.HasPrefix(base, "/") || strings.HasSuffix(base, " (deleted)") {
		return "", errResolve
	}
	return strings.TrimSuffix(base, "/") + "/" + p, nil
}

// stripSlashes removes trailing slashes where they only say "a directory"
// (mkdir, rename of directories): "a/b/" is "a/b".
func stripSlashes(p string) string {
	for len(p) > 1 && strings.HasSuffix(p, "/") {
		p = p[:len(p)-1]
	}
	return p
}

func readlink(p string) (string, error) {
	return readlinkat(unix.AT_FDCWD, p)
}

func readlinkat(dir int, p string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, p, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// guardDir is a policy.GuardDir over an open directory.
type guardDir struct {
	fd   int
	path string
	up   *guardDir // parent, opened on demand
	own  bool      // fd is ours to close
}

func (g *guardDir) Path() string { return g.path }

func (g *guardDir) Has(rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(g.fd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func (g *guardDir) Parent() policyDir {
	if g.path == "/" {
		return nil
	}
	if g.up == nil {
		fd, err := unix.Openat(g.fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		g.up = &guardDir{fd: fd, path: path.Dir(g.path), own: true}
	}
	return g.up
}

func (g *guardDir) close() {
	for d := g; d != nil; d = d.up {
		if d.own {
			unix.Close(d.fd)
		}
	}
}
