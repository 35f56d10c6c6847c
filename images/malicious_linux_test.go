package images_test

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	E "github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// importLayers imports an image of the given layers (tars) into s as
// name, returning the error.
func importLayers(t *testing.T, s *images.Store, name string, tars ...[]byte) error {
	t.Helper()
	var ls []v1.Layer
	for _, b := range tars {
		ls = append(ls, E.Layer(t, b))
	}
	p := filepath.Join(t.TempDir(), "img.tar")
	writeTarball(t, p, name, E.Image(t, v1.Config{}, ls...))
	_, err := s.Import(context.Background(), p, images.ImportOptions{})
	return err
}

// findNamed reports every path under root whose base name is name.
func findNamed(t *testing.T, root, name string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// Hostile layers are refused whole, and nothing of them lands anywhere
// (in the store or outside it): every case first names a file that an
// unchecked extraction would write outside the layer ("escaped").
func TestMaliciousLayersRefused(t *testing.T) {
	cases := []struct {
		name    string
		entries []E.Entry
		want    string
	}{
		{"dot-dot", []E.Entry{{Name: "../../../../escaped", Data: "x"}}, `".." in name`},
		{"dot-dot-inside", []E.Entry{{Name: "a/../../escaped", Data: "x"}}, `".." in name`},
		{"absolute", []E.Entry{{Name: "/tmp/escaped", Data: "x"}}, "absolute name"},
		{"symlink-parent-absolute", []E.Entry{
			{Name: "etc", Type: tar.TypeSymlink, Link: "/tmp"},
			{Name: "etc/escaped", Data: "x"},
		}, "not a directory of this layer"},
		{"symlink-parent-relative", []E.Entry{
			{Name: "up", Type: tar.TypeSymlink, Link: "../../../../../../tmp"},
			{Name: "up/escaped", Data: "x"},
		}, "not a directory of this layer"},
		{"symlink-deep-parent", []E.Entry{
			{Name: "a/b/", Type: tar.TypeDir},
			{Name: "a/b/c", Type: tar.TypeSymlink, Link: "/"},
			{Name: "a/b/c/tmp/escaped", Data: "x"},
		}, "not a directory of this layer"},
		{"hardlink-absolute", []E.Entry{{Name: "escaped", Type: tar.TypeLink, Link: "/etc/passwd"}}, "would write outside"},
		{"hardlink-dot-dot", []E.Entry{{Name: "escaped", Type: tar.TypeLink, Link: "../../../../etc/passwd"}}, "would write outside"},
		{"hardlink-through-symlink", []E.Entry{
			{Name: "l", Type: tar.TypeSymlink, Link: "/etc"},
			{Name: "escaped", Type: tar.TypeLink, Link: "l/passwd"},
		}, "not in this layer"},
		{"hardlink-to-lower-layer", []E.Entry{{Name: "escaped", Type: tar.TypeLink, Link: "bin/sh"}}, "not in this layer"},
		{"overlay-xattr", []E.Entry{{Name: "escaped", Data: "x", Xattrs: map[string]string{"user.overlay.redirect": "/etc"}}}, "overlayfs metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			s, err := images.Open(filepath.Join(root, "store"), images.Options{})
			if err != nil {
				t.Fatal(err)
			}
			before := findNamed(t, "/tmp", "escaped")
			err = importLayers(t, s, "evil:1", E.Tar(t, c.entries...))
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("import: %v, want a refusal saying %q", err, c.want)
			}
			if got := findNamed(t, root, "escaped"); len(got) != 0 {
				t.Errorf("left: %v", got)
			}
			if got := findNamed(t, "/tmp", "escaped"); len(got) != len(before) {
				t.Errorf("escaped into /tmp: %v", got)
			}
			assertEmpty(t, s)
		})
	}
}

// What is not refused is neutralised: device nodes left out, set-id
// bits stripped, symlinks kept as links (never followed by the host).
func TestMaliciousLayersNeutralised(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	err := importLayers(t, s, "odd:1", E.Tar(t,
		E.Entry{Name: "dev/", Type: tar.TypeDir},
		E.Entry{Name: "dev/sda", Type: tar.TypeBlock, Major: 8, Minor: 0, Mode: 0o666},
		E.Entry{Name: "dev/mem", Type: tar.TypeChar, Major: 1, Minor: 1, Mode: 0o666},
		E.Entry{Name: "dev/kmsg-whiteout-lookalike", Type: tar.TypeChar, Major: 0, Minor: 0},
		E.Entry{Name: "suid", Mode: 0o4777, Data: "x", UID: 0},
		E.Entry{Name: "abs-link", Type: tar.TypeSymlink, Link: "/etc/shadow"},
		E.Entry{Name: "fifo", Type: tar.TypeFifo, Mode: 0o644},
		E.Entry{Name: "dup", Data: "first"},
		E.Entry{Name: "dup", Data: "second"},
		E.Entry{Name: "hl", Type: tar.TypeLink, Link: "dup"},
	))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "odd:1", "x", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	l := r.Layers[0]
	for _, dev := range []string{"dev/sda", "dev/mem", "dev/kmsg-whiteout-lookalike"} {
		if _, err := os.Lstat(filepath.Join(l, dev)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("device node %s created: %v", dev, err)
		}
	}
	if fi, _ := os.Lstat(filepath.Join(l, "suid")); fi == nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid: %v", fi)
	}
	if target, err := os.Readlink(filepath.Join(l, "abs-link")); err != nil || target != "/etc/shadow" {
		t.Errorf("abs-link: %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(l, "hl")); string(b) != "second" {
		t.Errorf("hard link to the last dup: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(l, "fifo")); fi == nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v", fi)
	}
}

// Whiteouts and opaque directories, as overlayfs sees them: mounted with
// userxattr over the two layers, the upper layer's deletions show.
func TestWhiteoutsInOverlay(t *testing.T) {
	testutil.RequireRoot(t)
	s := newStore(t)
	ctx := context.Background()
	err := importLayers(t, s, "wh:1",
		E.Tar(t,
			E.Entry{Name: "a", Data: "a"},
			E.Entry{Name: "keep", Data: "k"},
			E.Entry{Name: "d/", Type: tar.TypeDir},
			E.Entry{Name: "d/old", Data: "old"},
			E.Entry{Name: "gone/", Type: tar.TypeDir},
			E.Entry{Name: "gone/x", Data: "x"},
		),
		E.Tar(t,
			E.Entry{Name: ".wh.a", Data: ""},
			E.Entry{Name: ".wh.gone", Data: ""},
			E.Entry{Name: "d/", Type: tar.TypeDir},
			E.Entry{Name: "d/.wh..wh..opq", Data: ""},
			E.Entry{Name: "d/new", Data: "new"},
		))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "wh:1", "x", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	mnt := t.TempDir()
	opts := "userxattr,lowerdir=" + r.Layers[1] + ":" + r.Layers[0]
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	out, err := exec.Command("find", mnt, "-mindepth", "1").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(strings.TrimSpace(string(out)), mnt+"/", "")
	fields := strings.Fields(got)
	want := map[string]bool{"keep": true, "d": true, "d/new": true}
	if len(fields) != len(want) {
		t.Errorf("merged tree: %v, want %v", fields, want)
	}
	for _, f := range fields {
		if !want[f] {
			t.Errorf("merged tree has %s (want %v)", f, want)
		}
	}
}
