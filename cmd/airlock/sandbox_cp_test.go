package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
)

func tarOf(t *testing.T, entries ...string) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range entries {
		if name[len(name)-1] == '/' {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755})
			continue
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 4})
		tw.Write([]byte("evil"))
	}
	tw.Close()
	return &b
}

// A downloaded tree is extracted inside the target directory only: not
// through a symlink that already sits in the target (the sandbox chose
// the archive's names), not above it.
func TestUntarStaysInTarget(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := untarInto(tarOf(t, "top/", "top/link/planted"), dir); err == nil {
		t.Error("extracting through a symlink to outside the target succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("a file was written outside the target through a symlink")
	}
	if err := untarInto(tarOf(t, "top/../../../planted"), dir); !errors.Is(err, errdefs.ErrPermission) {
		t.Errorf("an entry above the target: %v", err)
	}
	if err := untarInto(tarOf(t, "top/", "top/sub/", "top/sub/f"), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "f")); err != nil || string(b) != "evil" {
		t.Fatalf("normal extraction: %q %v", b, err)
	}
}
