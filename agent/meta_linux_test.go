package agent

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// xattrNames is every extended attribute name on host path p.
func xattrNames(t *testing.T, p string) []string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		t.Fatalf("llistxattr %s: %v", p, err)
	}
	var out []string
	for _, b := range bytes.Split(buf[:n], []byte{0}) {
		if len(b) > 0 {
			out = append(out, string(b))
		}
	}
	return out
}

// TestFileMetadata sets, reads, lists, renames and clears file metadata
// through the agent, and reads metadata another program set on the file.
func TestFileMetadata(t *testing.T) {
	root := t.TempDir()
	g := startGuest(t, guestOptions{root: root})
	f := g.client.Files().(sandbox.MetadataFiles)
	ctx := testCtx(t)
	if err := f.WriteFile(ctx, "/d/a.txt", strings.NewReader("x"), 0o644, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"author": "mish", "purpose": "upload"}
	if err := f.SetMetadata(ctx, "/d/a.txt", want); err != nil {
		t.Fatal(err)
	}
	if got := xattrNames(t, filepath.Join(root, "d/a.txt")); !reflect.DeepEqual(sorted(got), []string{"user.e2b.author", "user.e2b.purpose"}) {
		t.Fatalf("on disk: %q", got)
	}
	if fi, err := f.Stat(ctx, "/d/a.txt"); err != nil || !maps.Equal(fi.Metadata, want) {
		t.Fatalf("stat: %v %v", fi.Metadata, err)
	}
	l, err := f.List(ctx, "/d")
	if err != nil || len(l) != 1 || !maps.Equal(l[0].Metadata, want) {
		t.Fatalf("list: %+v %v", l, err)
	}
	if err := f.Rename(ctx, "/d/a.txt", "/d/b.txt"); err != nil {
		t.Fatal(err)
	}
	// Replaced: a key left out goes.
	if err := f.SetMetadata(ctx, "/d/b.txt", map[string]string{"author": "other"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(ctx, "/d/b.txt"); !maps.Equal(fi.Metadata, map[string]string{"author": "other"}) {
		t.Fatalf("after replace: %v", fi.Metadata)
	}
	// Set by another program: user.e2b.* shows (the rules apply), other
	// user.* attributes do not.
	host := filepath.Join(root, "d/b.txt")
	for name, v := range map[string]string{"user.e2b.tag": "out-of-band", "user.other": "x", "user.e2b.bin": "\x01", "user.e2b.bad key": "v"} {
		if err := unix.Setxattr(host, name, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := f.Stat(ctx, "/d/b.txt"); !maps.Equal(fi.Metadata, map[string]string{"author": "other", "tag": "out-of-band"}) {
		t.Fatalf("out of band: %v", fi.Metadata)
	}
	if err := f.SetMetadata(ctx, "/d/b.txt", nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(ctx, "/d/b.txt"); fi.Metadata != nil {
		t.Fatalf("cleared: %v", fi.Metadata)
	}
	// Directories too; not symlinks, and not what does not exist.
	if err := f.SetMetadata(ctx, "/d", map[string]string{"k": "dir"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(ctx, "/d"); fi.Metadata["k"] != "dir" {
		t.Fatalf("dir: %v", fi.Metadata)
	}
	if err := os.Symlink("b.txt", filepath.Join(root, "d/link")); err != nil {
		t.Fatal(err)
	}
	if err := f.SetMetadata(ctx, "/d/link", map[string]string{"k": "v"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("symlink: %v", err)
	}
	if err := f.SetMetadata(ctx, "/d/none", map[string]string{"k": "v"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// TestFileMetadataStaysInItsNamespace: the metadata call can only make
// user.e2b.* attributes. Unconfined, the agent's identity (root here) can
// set a trusted.* attribute on the very file, so a key that reached the
// kernel as a name of its own would work; through SetMetadata the same
// keys either are refused or land under user.e2b.
func TestFileMetadataStaysInItsNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	g := startGuest(t, guestOptions{root: root})
	f := g.client.Files().(sandbox.MetadataFiles)
	ctx := testCtx(t)
	if err := f.WriteFile(ctx, "/victim", strings.NewReader("x"), 0o755, true); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(root, "victim")
	// Unconfined: it works.
	if err := unix.Setxattr(host, "trusted.airlock-probe", []byte("x"), 0); err != nil {
		t.Fatalf("unconfined trusted.* xattr: %v (the attack cannot show anything)", err)
	}
	if err := unix.Removexattr(host, "trusted.airlock-probe"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"\x00trusted.x", "../trusted.x", "/security.capability", "trusted:x", "a\x00security.capability"} {
		if err := f.SetMetadata(ctx, "/victim", map[string]string{key: "v"}); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("key %q: %v, want ErrInvalid", key, err)
		}
	}
	accepted := map[string]string{"trusted.x": "v", "security.capability": "\x01", "system.posix_acl_access": "v"}
	if err := f.SetMetadata(ctx, "/victim", accepted); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("binary value: %v, want ErrInvalid", err)
	}
	accepted["security.capability"] = "AQAAAgAgAAAAAAAAAAAAAAAAAAA="
	if err := f.SetMetadata(ctx, "/victim", accepted); err != nil {
		t.Fatal(err)
	}
	names := sorted(xattrNames(t, host))
	if !reflect.DeepEqual(names, []string{"user.e2b.security.capability", "user.e2b.system.posix_acl_access", "user.e2b.trusted.x"}) {
		t.Fatalf("attributes on the file: %q", names)
	}
	if _, err := unix.Getxattr(host, "security.capability", make([]byte, 64)); err != unix.ENODATA {
		t.Fatalf("security.capability: %v, want ENODATA", err)
	}
}
