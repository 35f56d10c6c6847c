package agent

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// File metadata lives in extended attributes named
// sandbox.MetadataXattrPrefix+key, on regular files and directories only.
// Linux has no *at form of the xattr calls before 6.13, so a file is
// reached through an O_PATH descriptor opened inside the root and its
// /proc/self/fd magic link (as the watcher does): the name is never
// resolved twice, and the prefix is added here, never taken from the host.

// procFD is the path of descriptor fd through /proc.
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// metaFileOK reports whether metadata may be kept on a file of mode m.
func metaFileOK(m uint32) bool {
	t := m & unix.S_IFMT
	return t == unix.S_IFREG || t == unix.S_IFDIR
}

// readMetaFD is the metadata of the file open (O_PATH) as fd, bounded as
// sandbox.CheckMetadata bounds it; entries that break the rules (set by
// other tools) are left out. nil when there is none or it cannot be read.
func readMetaFD(fd int) map[string]string {
	p := procFD(fd)
	names := make([]byte, 64<<10) // XATTR_LIST_MAX
	n, err := unix.Listxattr(p, names)
	if err != nil || n == 0 {
		return nil
	}
	var out map[string]string
	total := 0
	val := make([]byte, sandbox.MaxMetadataBytes)
	for _, name := range bytes.Split(names[:n], []byte{0}) {
		key, ok := strings.CutPrefix(string(name), sandbox.MetadataXattrPrefix)
		if !ok || !sandbox.ValidMetadataKey(key) {
			continue
		}
		vn, err := unix.Getxattr(p, string(name), val)
		if err != nil {
			continue // removed meanwhile, or larger than any value may be
		}
		v := string(val[:vn])
		total += len(name) + vn
		if !sandbox.ValidMetadataValue(v) || total > sandbox.MaxMetadataBytes || len(out) == sandbox.MaxMetadataEntries {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = v
	}
	return out
}

// readMetaAt is the metadata of name in directory dfd (nil for other
// than a regular file or directory).
func readMetaAt(dfd int, name string) map[string]string {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	if unix.Fstat(fd, &s) != nil || !metaFileOK(s.Mode) {
		return nil
	}
	return readMetaFD(fd)
}

// setMeta replaces the metadata of req.Path with req.Meta.
func (g *guest) setMeta(st *yamux.Stream, req *request) {
	if err := g.setMetaPath(req.Path, req.Meta); err != nil {
		respondErr(st, err)
		return
	}
	respond(st, &response{})
}

func (g *guest) setMetaPath(path string, meta map[string]string) error {
	if err := sandbox.CheckMetadata(meta); err != nil {
		return err
	}
	fd, err := g.root.open(path, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		return errnoKind(err)
	}
	if !metaFileOK(s.Mode) {
		return fmt.Errorf("set metadata of %s: not a regular file or directory: %w", path, sandbox.ErrInvalid)
	}
	p := procFD(fd)
	for k := range readMetaFD(fd) {
		if _, keep := meta[k]; !keep {
			if err := unix.Removexattr(p, sandbox.MetadataXattrPrefix+k); err != nil && err != unix.ENODATA {
				return metaErr(path, err)
			}
		}
	}
	for k, v := range meta {
		if err := unix.Setxattr(p, sandbox.MetadataXattrPrefix+k, []byte(v), 0); err != nil {
			return metaErr(path, err)
		}
	}
	return nil
}

// metaErr names why an attribute could not be set.
func metaErr(path string, err error) error {
	switch err {
	case unix.ENOTSUP:
		return fmt.Errorf("set metadata of %s: the filesystem keeps no user extended attributes: %w", path, sandbox.ErrNotSupported)
	case unix.ENOENT:
		return fmt.Errorf("set metadata of %s: /proc is not mounted in the sandbox: %w", path, sandbox.ErrNotSupported)
	case unix.E2BIG, unix.ERANGE:
		return fmt.Errorf("set metadata of %s: %v: %w", path, err, sandbox.ErrLimit)
	}
	return fmt.Errorf("set metadata of %s: %w", path, errnoKind(err))
}
