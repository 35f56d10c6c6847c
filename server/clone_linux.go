package server

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// Clone methods (api.CopyReport.Method).
const (
	cloneReflink = "reflink" // every file shares its blocks with its source (FICLONE)
	cloneCopy    = "copy"    // data copied, holes kept (SEEK_DATA/SEEK_HOLE)
	cloneMixed   = "mixed"   // some files of each
)

// cloneStats is what cloneTree did.
type cloneStats struct {
	Files, Skipped    int
	Bytes             int64 // the regular files' sizes together
	Reflinked, Copied int   // files cloned by each method
	Stored            int64 // the blocks the copies take (files and directories)
	limit             int64 // Stored may not pass it (0: no bound; negative: nothing may be stored)
}

func (c *cloneStats) add(o cloneStats) {
	c.Files += o.Files
	c.Skipped += o.Skipped
	c.Bytes += o.Bytes
	c.Reflinked += o.Reflinked
	c.Copied += o.Copied
	c.Stored += o.Stored
}

// method names how the files were copied ("" when there were none).
func (c cloneStats) method() string {
	switch {
	case c.Reflinked > 0 && c.Copied > 0:
		return cloneMixed
	case c.Reflinked > 0:
		return cloneReflink
	case c.Copied > 0:
		return cloneCopy
	}
	return ""
}

// cloneTree copies the tree of directory src into the existing empty
// directory dst, keeping owners, modes, times, extended attributes (an
// overlay upper directory's user.overlay.* ones among them) and overlay
// whiteouts (0/0 character devices). Files share their blocks with their
// source where the filesystem can (a reflink), else are copied with
// their holes. Nothing is resolved through a symlink: every name is
// opened relative to its parent's descriptor with O_NOFOLLOW, so a tree a
// sandbox wrote cannot send the copy outside src or dst. Sockets, fifos
// and other devices are skipped (counted). On error dst holds part of
// the tree: the caller removes it.
func cloneTree(src, dst string) (cloneStats, error) { return cloneTreeWithin(src, dst, 0) }

// cloneTreeWithin is cloneTree refusing (ErrLimit) before a file whose
// copy would take the blocks past limit bytes (0: no limit): a copy
// charged to a disk quota never writes what the quota has not left.
func cloneTreeWithin(src, dst string, limit int64) (cloneStats, error) {
	st := cloneStats{limit: limit}
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("clone %s: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("clone into %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	if err := cloneDir(sfd, dfd, &st, 0); err != nil {
		return st, fmt.Errorf("clone %s: %w", src, err)
	}
	var fi unix.Stat_t
	if err := unix.Fstat(sfd, &fi); err != nil {
		return st, err
	}
	return st, cloneAttrs(sfd, dfd, &fi)
}

// maxCloneDepth bounds the recursion (a tree deeper is refused).
const maxCloneDepth = 256

// cloneDir copies the entries of the directory sfd into dfd.
func cloneDir(sfd, dfd int, st *cloneStats, depth int) error {
	if depth > maxCloneDepth {
		return fmt.Errorf("deeper than %d directories", maxCloneDepth)
	}
	names, err := readDirNames(sfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := cloneEntry(sfd, dfd, name, st, depth); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// readDirNames lists the directory fd (a dup is read, fd stays usable).
func readDirNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

func cloneEntry(sfd, dfd int, name string, st *cloneStats, depth int) error {
	var fi unix.Stat_t
	if err := unix.Fstatat(sfd, name, &fi, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	switch fi.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return cloneSubdir(sfd, dfd, name, st, depth)
	case unix.S_IFREG:
		return cloneFile(sfd, dfd, name, st)
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name)
		if err == nil {
			err = unix.Symlinkat(target, dfd, name)
		}
		if err == nil {
			err = unix.Fchownat(dfd, name, int(fi.Uid), int(fi.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		return err
	case unix.S_IFCHR:
		if fi.Rdev == 0 { // an overlay whiteout: the layer's deletion of a lower file
			err := unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, 0)
			if err == nil {
				err = unix.Fchownat(dfd, name, int(fi.Uid), int(fi.Gid), unix.AT_SYMLINK_NOFOLLOW)
			}
			return err
		}
	}
	st.Skipped++
	return nil
}

func cloneSubdir(sfd, dfd int, name string, st *cloneStats, depth int) error {
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return err
	}
	d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	if err := cloneDir(s, d, st, depth+1); err != nil {
		return err
	}
	if err := st.charge(d); err != nil {
		return err
	}
	var fi unix.Stat_t
	if err := unix.Fstat(s, &fi); err != nil {
		return err
	}
	return cloneAttrs(s, d, &fi) // last: a read-only directory is filled first
}

// fits refuses a copy of n more bytes of blocks past the limit.
func (c *cloneStats) fits(n int64) error {
	if c.limit != 0 && c.Stored+n > c.limit {
		return fmt.Errorf("the copy would take more than the %d bytes of disk its tenant's quota has left (max_disk): %w", c.limit, sandbox.ErrLimit)
	}
	return nil
}

// charge counts the blocks of the copy d.
func (c *cloneStats) charge(d int) error {
	var fi unix.Stat_t
	if err := unix.Fstat(d, &fi); err != nil {
		return err
	}
	c.Stored += fi.Blocks * 512
	return c.fits(0)
}

func cloneFile(sfd, dfd int, name string, st *cloneStats) error {
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	var fi unix.Stat_t
	if err := unix.Fstat(s, &fi); err != nil {
		return err
	}
	if fi.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("changed while copied (not a regular file now)")
	}
	if err := st.fits(fi.Blocks * 512); err != nil {
		return err
	}
	d, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	if err := unix.IoctlFileClone(d, s); err == nil {
		st.Reflinked++
	} else if err := sparseCopy(s, d, fi.Size); err != nil {
		return err
	} else {
		st.Copied++
	}
	st.Files++
	st.Bytes += fi.Size
	if err := st.charge(d); err != nil {
		return err
	}
	return cloneAttrs(s, d, &fi)
}

// sparseCopy copies the data regions of s (size bytes) into the empty
// file d, leaving its holes holes.
func sparseCopy(s, d int, size int64) error {
	if err := unix.Ftruncate(d, size); err != nil {
		return err
	}
	for off := int64(0); off < size; {
		data, err := unix.Seek(s, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(s, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		hole = min(hole, size)
		if err := copyRange(s, d, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copyRange copies n bytes at off of s to the same offset of d: in the
// kernel (copy_file_range), else through a buffer.
func copyRange(s, d int, off, n int64) error {
	for n > 0 {
		ro, wo := off, off
		c, err := unix.CopyFileRange(s, &ro, d, &wo, int(min(n, 1<<30)), 0)
		if err != nil {
			return bufferCopy(s, d, off, n)
		}
		if c == 0 {
			return io.ErrUnexpectedEOF // the file shrank while copied
		}
		off, n = off+int64(c), n-int64(c)
	}
	return nil
}

func bufferCopy(s, d int, off, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		c, err := unix.Pread(s, buf[:min(n, int64(len(buf)))], off)
		if err != nil {
			return err
		}
		if c == 0 {
			return io.ErrUnexpectedEOF
		}
		if _, err := unix.Pwrite(d, buf[:c], off); err != nil {
			return err
		}
		off, n = off+int64(c), n-int64(c)
	}
	return nil
}

// cloneAttrs gives d (a file or directory descriptor) s's extended
// attributes, owner, mode and times, in that order (chown clears set-id
// bits, so the mode follows it).
func cloneAttrs(s, d int, fi *unix.Stat_t) error {
	if err := cloneXattrs(s, d); err != nil {
		return err
	}
	if err := unix.Fchown(d, int(fi.Uid), int(fi.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(d, fi.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fdPath(d), []unix.Timespec{fi.Atim, fi.Mtim}, 0)
}

// fdPath names descriptor fd through /proc (for calls without an fd form).
func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

func cloneXattrs(s, d int) error {
	buf := make([]byte, 64<<10)
	n, err := unix.Flistxattr(s, buf)
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list extended attributes: %w", err)
	}
	val := make([]byte, 64<<10)
	for _, name := range splitNul(buf[:n]) {
		v, err := unix.Fgetxattr(s, name, val)
		if err != nil {
			return fmt.Errorf("extended attribute %s: %w", name, err)
		}
		if err := unix.Fsetxattr(d, name, val[:v], 0); err != nil {
			return fmt.Errorf("extended attribute %s: %w", name, err)
		}
	}
	return nil
}

func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
