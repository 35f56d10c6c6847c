package server

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestCloneTree: a clone keeps contents, holes, modes, owners, times,
// xattrs, symlinks (as links, never followed) and whiteouts, and skips
// fifos; a symlink planted as a directory cannot send it outside.
func TestCloneTree(t *testing.T) {
	testutil.RequireRoot(t) // owners and whiteouts
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o600))
	must(os.MkdirAll(filepath.Join(src, "d", "e"), 0o750))
	must(os.WriteFile(filepath.Join(src, "d", "e", "f"), []byte("data"), 0o640))
	must(os.Lchown(filepath.Join(src, "d", "e", "f"), 100123, 100456))
	sparse := filepath.Join(src, "sparse")
	f, err := os.Create(sparse)
	must(err)
	_, err = f.WriteAt([]byte("end"), 64<<20)
	must(err)
	f.Close()
	must(os.Symlink(outside, filepath.Join(src, "escape")))
	must(unix.Mknod(filepath.Join(src, "d", "gone"), unix.S_IFCHR|0o600, 0))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	must(unix.Setxattr(filepath.Join(src, "d"), "user.overlay.opaque", []byte("y"), 0))
	must(os.Chmod(filepath.Join(src, "d"), 0o700|os.ModeSetgid))

	st, err := cloneTree(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2 || st.Skipped != 1 || st.Bytes != 64<<20+3+4 || st.method() == "" {
		t.Fatalf("stats: %+v", st)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "d", "e", "f")); err != nil || string(b) != "data" {
		t.Fatalf("content: %q %v", b, err)
	}
	var fi unix.Stat_t
	must(unix.Lstat(filepath.Join(dst, "d", "e", "f"), &fi))
	if fi.Uid != 100123 || fi.Gid != 100456 || fi.Mode&0o7777 != 0o640 {
		t.Errorf("owner/mode: %d:%d %o", fi.Uid, fi.Gid, fi.Mode&0o7777)
	}
	must(unix.Lstat(filepath.Join(dst, "sparse"), &fi))
	if fi.Size != 64<<20+3 || fi.Blocks*512 > 1<<20 {
		t.Errorf("sparse file: size %d, %d bytes allocated (holes lost)", fi.Size, fi.Blocks*512)
	}
	must(unix.Lstat(filepath.Join(dst, "d"), &fi))
	if fi.Mode&0o7777 != 0o700|unix.S_ISGID {
		t.Errorf("directory mode %o", fi.Mode&0o7777)
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(dst, "d"), "user.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque xattr: %q %v", buf[:n], err)
	}
	must(unix.Lstat(filepath.Join(dst, "d", "gone"), &fi))
	if fi.Mode&unix.S_IFMT != unix.S_IFCHR || fi.Rdev != 0 {
		t.Errorf("whiteout: mode %o rdev %d", fi.Mode, fi.Rdev)
	}
	if target, err := os.Readlink(filepath.Join(dst, "escape")); err != nil || target != outside {
		t.Errorf("symlink: %q %v", target, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !os.IsNotExist(err) {
		t.Errorf("fifo copied: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the clone wrote through a symlink: %v", ents)
	}
	// The source's root replaced by a symlink: refused, not followed.
	link := filepath.Join(t.TempDir(), "link")
	must(os.Symlink(outside, link))
	if _, err := cloneTree(link, t.TempDir()); err == nil {
		t.Fatal("cloneTree followed a symlink as its source")
	}
}
