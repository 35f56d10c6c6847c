package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/fsutil"
)

// Whiteout names of the OCI layer format.
const (
	whPrefix = ".wh."
	whOpaque = ".wh..wh..opq"
	whMeta   = ".wh..wh."
)

// opaqueXattr marks an opaque directory for overlayfs mounted with
// userxattr (what every sandbox mount uses, in a user namespace or not).
const opaqueXattr = "user.overlay.opaque"

// unpackOptions are the choices an unpack makes.
type unpackOptions struct {
	// keepSetID keeps set-uid/set-gid bits and security.capability;
	// otherwise they are stripped (and counted).
	keepSetID bool
	// chown applies the entries' owners (only root can).
	chown bool
	// limit bounds the bytes of file contents written.
	limit int64
}

// unpackResult says what an unpack did.
type unpackResult struct {
	Bytes    int64    `json:"bytes"`
	Entries  int      `json:"entries"`
	Skipped  []string `json:"skipped,omitempty"` // device nodes and other entries left out (first 20)
	NSkipped int      `json:"n_skipped,omitempty"`
	Stripped int      `json:"stripped_setid,omitempty"` // files whose set-id bits or capabilities were removed
}

// resolveFlags confine every lookup below the layer's root: no symlink
// (so no way out through one), no magic link, no other mount.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// unpacker writes one layer's tar into an empty directory.
type unpacker struct {
	root int
	opts unpackOptions
	res  unpackResult
	dirs []dirMeta // applied last, deepest first, so that writes into read-only dirs work
}

type dirMeta struct {
	rel      string
	mode     uint32
	uid, gid int
	mtime    time.Time
}

// unpackLayer reads the uncompressed layer tar r into dir, in overlayfs
// form, and returns the digest of the stream it read (the diff ID). Any
// entry that would write outside dir is an error naming the entry; so is
// anything it cannot represent faithfully except device nodes, which are
// left out (a sandbox gets its own /dev).
func unpackLayer(r io.Reader, dir string, opts unpackOptions) (string, *unpackResult, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(root)
	u := &unpacker{root: root, opts: opts}
	h := newDigester()
	tr := tar.NewReader(io.TeeReader(r, h))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("read layer: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return "", nil, fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
	// The digest covers the whole stream, end-of-archive padding included.
	if _, err := io.Copy(io.Discard, io.TeeReader(r, h)); err != nil {
		return "", nil, fmt.Errorf("read layer: %w", err)
	}
	for i := len(u.dirs) - 1; i >= 0; i-- {
		if err := u.applyDir(u.dirs[i]); err != nil {
			return "", nil, fmt.Errorf("layer entry %q: %w", u.dirs[i].rel, err)
		}
	}
	return h.digest(), &u.res, nil
}

// errEscape is an entry naming something outside the layer.
var errEscape = fmt.Errorf("refused: it would write outside the layer: %w", errdefs.ErrInvalid)

// cleanName makes a tar name relative and clean, refusing absolute names
// and ".." components (never silently re-rooted: a layer that tries is
// broken or hostile). "" is the layer's root.
func cleanName(n string) (string, error) {
	if strings.IndexByte(n, 0) >= 0 || len(n) > 4096 {
		return "", fmt.Errorf("bad name: %w", errdefs.ErrInvalid)
	}
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("absolute name: %w", errEscape)
	}
	for _, c := range strings.Split(n, "/") {
		if c == ".." {
			return "", fmt.Errorf(`".." in name: %w`, errEscape)
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	return c, nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	u.res.Entries++
	if rel == "" {
		return nil // the layer's root: the sandbox's root keeps its own
	}
	dirRel, base := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if strings.HasPrefix(base, whPrefix) {
		return u.whiteout(dirRel, base)
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		u.skip(rel, "device node")
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	}
	parent, err := u.mkdirAll(dirRel)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	mode := uint32(hdr.Mode) & 0o7777
	if !u.opts.keepSetID && hdr.Typeflag != tar.TypeDir && mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		mode &^= unix.S_ISUID | unix.S_ISGID
		u.res.Stripped++
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		var st unix.Stat_t
		if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(parent, base, 0); err != nil {
				return err
			}
		}
		if err := unix.Mkdirat(parent, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		if err := u.xattrs(parent, base, hdr, true); err != nil {
			return err
		}
		u.dirs = append(u.dirs, dirMeta{rel: rel, mode: mode, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime})
		return nil
	case tar.TypeReg: // the reader reports the old \x00 type as TypeReg
		if err := u.replace(parent, base); err != nil {
			return err
		}
		return u.file(parent, base, hdr, mode, r)
	case tar.TypeSymlink:
		if strings.IndexByte(hdr.Linkname, 0) >= 0 || len(hdr.Linkname) > 4095 || hdr.Linkname == "" {
			return fmt.Errorf("bad symlink target: %w", errdefs.ErrInvalid)
		}
		if err := u.replace(parent, base); err != nil {
			return err
		}
		// The target is kept as written, absolute or not: it is only
		// ever followed inside the sandbox's root, never by the host.
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return err
		}
		return u.meta(parent, base, hdr, 0, true)
	case tar.TypeLink:
		return u.hardlink(parent, base, hdr)
	case tar.TypeFifo:
		if err := u.replace(parent, base); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0); err != nil {
			return err
		}
		return u.meta(parent, base, hdr, mode, false)
	}
	return fmt.Errorf("tar entry type %q not supported: %w", hdr.Typeflag, errdefs.ErrInvalid)
}

func (u *unpacker) skip(rel, why string) {
	u.res.NSkipped++
	if len(u.res.Skipped) < 20 {
		u.res.Skipped = append(u.res.Skipped, rel+" ("+why+")")
	}
}

// whiteout turns ".wh.NAME" into overlayfs's whiteout (a 0/0 character
// device) and ".wh..wh..opq" into an opaque directory.
func (u *unpacker) whiteout(dirRel, base string) error {
	parent, err := u.mkdirAll(dirRel)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if base == whOpaque {
		fd, err := unix.Openat2(parent, ".", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0)
	}
	if strings.HasPrefix(base, whMeta) {
		return nil // AUFS's own metadata (.wh..wh.plnk, ...): nothing to apply
	}
	name := strings.TrimPrefix(base, whPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("bad whiteout: %w", errdefs.ErrInvalid)
	}
	if err := u.replace(parent, name); err != nil {
		return err
	}
	return unix.Mknodat(parent, name, unix.S_IFCHR, 0)
}

// mkdirAll opens (making the missing ones, 0755) the directories of rel
// below the root, refusing any component that exists as something other
// than a directory: a parent that is a symlink is never followed.
func (u *unpacker) mkdirAll(rel string) (int, error) {
	cur, err := unix.Openat2(u.root, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		return -1, err
	}
	if rel == "" {
		return cur, nil
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := unix.Openat2(cur, c, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat2(cur, c, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
			}
		}
		unix.Close(cur)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
				return -1, fmt.Errorf("parent %q is not a directory of this layer (a symlink?): %w", c, errEscape)
			}
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// replace removes what a later entry of the same name replaces (a tar may
// name a path twice; the last wins). A directory with contents is not
// replaced by a non-directory.
func (u *unpacker) replace(parent int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(parent, name, flags); err != nil {
		return fmt.Errorf("replace existing entry: %w", err)
	}
	return nil
}

func (u *unpacker) file(parent int, base string, hdr *tar.Header, mode uint32, r io.Reader) error {
	fd, err := unix.Openat(parent, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	room := u.opts.limit - u.res.Bytes
	n, err := io.Copy(f, io.LimitReader(r, room+1))
	u.res.Bytes += n
	if err != nil {
		return err
	}
	if n > room {
		return fmt.Errorf("layer unpacks to more than %d bytes: %w", u.opts.limit, errdefs.ErrLimit)
	}
	if err := u.xattrsFD(fd, hdr); err != nil {
		return err
	}
	if u.opts.chown {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	// After chown, which clears set-id bits.
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.AccessTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if hdr.AccessTime.IsZero() {
		ts[0] = ts[1]
	}
	return unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// hardlink links to a regular file this layer already holds; a link to
// anything else (a file of a lower layer, a directory, a path outside) is
// refused.
func (u *unpacker) hardlink(parent int, base string, hdr *tar.Header) error {
	trel, err := cleanName(hdr.Linkname)
	if err != nil || trel == "" {
		return fmt.Errorf("hard link to %q: %w", hdr.Linkname, errEscape)
	}
	tdir, tbase := path.Split(trel)
	tparent, err := unix.Openat2(u.root, "./"+strings.TrimSuffix(tdir, "/"), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		return fmt.Errorf("hard link to %q: the target is not in this layer: %w", hdr.Linkname, errdefs.ErrInvalid)
	}
	defer unix.Close(tparent)
	var st unix.Stat_t
	if err := unix.Fstatat(tparent, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("hard link to %q: the target is not a regular file of this layer: %w", hdr.Linkname, errdefs.ErrInvalid)
	}
	if err := u.replace(parent, base); err != nil {
		return err
	}
	return unix.Linkat(tparent, tbase, parent, base, 0)
}

// meta sets the owner, mode (not for symlinks) and times of an entry.
func (u *unpacker) meta(parent int, base string, hdr *tar.Header, mode uint32, link bool) error {
	if u.opts.chown {
		if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if !link {
		if err := unix.Fchmodat(parent, base, mode, 0); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	return unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func (u *unpacker) applyDir(d dirMeta) error {
	fd, err := unix.Openat2(u.root, "./"+d.rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if u.opts.chown {
		if err := unix.Fchown(fd, d.uid, d.gid); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, d.mode); err != nil {
		return err
	}
	ts := []unix.Timeval{unix.NsecToTimeval(d.mtime.UnixNano()), unix.NsecToTimeval(d.mtime.UnixNano())}
	return unix.Futimes(fd, ts)
}

// xattrs applies an entry's extended attributes to parent/base (a
// directory, opened for it).
func (u *unpacker) xattrs(parent int, base string, hdr *tar.Header, dir bool) error {
	if len(hdr.PAXRecords) == 0 {
		return nil
	}
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(parent, base, flags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return u.xattrsFD(fd, hdr)
}

// xattrsFD applies the user.* attributes of an entry (not overlayfs's
// own, which would forge whiteouts or redirects) and, with keepSetID,
// file capabilities. Others (trusted.*, security labels of the build
// host) are left out.
func (u *unpacker) xattrsFD(fd int, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "user.overlay."):
			return fmt.Errorf("extended attribute %q: overlayfs metadata in a layer: %w", name, errdefs.ErrInvalid)
		case strings.HasPrefix(name, "user."):
		case name == "security.capability" && u.opts.keepSetID:
		case name == "security.capability":
			u.res.Stripped++
			continue
		default:
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("extended attribute %q: %w", name, err)
		}
	}
	return nil
}

// removeTree removes a tree the store made (see fsutil.RemoveAll).
func removeTree(dir string) error { return fsutil.RemoveAll(dir) }
