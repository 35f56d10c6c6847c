package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

func writeTree(t *testing.T, dir string) {
	t.Helper()
	for p, content := range map[string]string{"a.txt": "alpha", "d/b.bin": "beta", "d/e/c": "alpha", ".hidden": ""} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "d/b.bin"), 0o4750)
	os.Chmod(filepath.Join(dir, "d/e"), 0o500)
	os.Symlink("../a.txt", filepath.Join(dir, "d/link"))
	os.Symlink("/etc/shadow", filepath.Join(dir, "out"))
}

// A tree scanned into the object store and restored is the same tree
// (modes, set-id bits, symlinks, owners); equal contents are stored once;
// a changed object or tree is named.
func TestManifestRoundTrip(t *testing.T) {
	testutil.RequireRoot(t) // restore gives files to their owners
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "restored")
	writeTree(t, src)
	store := &Store{dir: filepath.Join(t.TempDir(), "objects")}
	m, stored, skipped, err := ScanTree(src, Owner{}, store, NewScan(context.Background(), "test", Version))
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	if stored != int64(len("alpha")+len("beta")) {
		t.Errorf("stored %d bytes: equal contents must be stored once", stored)
	}
	if err := store.Verify(context.Background(), m, "test"); err != nil {
		t.Fatal(err)
	}
	if err := RestoreTree(context.Background(), m, store, dst, Owner{}); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := ScanTree(dst, Owner{}, nil, NewScan(context.Background(), "test", Version))
	if err != nil {
		t.Fatal(err)
	}
	if err := CompareManifests(m, got, "restored"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, ".hidden"), []byte("gamma"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, _, _ = ScanTree(dst, Owner{}, nil, NewScan(context.Background(), "test", Version))
	err = CompareManifests(m, got, "changed")
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `".hidden"`) {
		t.Fatalf("a changed file: %v", err)
	}
	// Tamper with the stored content of "a.txt" (and "d/e/c": the same).
	for _, e := range m.Entries {
		if e.Path == "a.txt" {
			os.Chmod(store.path(e.SHA256), 0o600)
			os.WriteFile(store.path(e.SHA256), []byte("evil"), 0o600)
		}
	}
	if err := store.Verify(context.Background(), m, "tampered"); !errors.As(err, &ce) || !strings.Contains(err.Error(), `"a.txt"`) {
		t.Fatalf("tampered object: %v", err)
	}
}

// A manifest whose bytes changed is refused.
func TestManifestHashChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.json")
	sum, err := WriteManifest(p, &Manifest{Version: 1, Entries: []Entry{{Path: "a", Kind: "file", SHA256: strings.Repeat("0", 64)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(p, sum, "ok"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte(`{"version":1,"entries":[]}`), 0o600)
	if _, err := ReadManifest(p, sum, "changed"); err == nil || !strings.Contains(err.Error(), "was changed") {
		t.Fatalf("changed manifest: %v", err)
	}
	if _, err := ReadManifest(filepath.Join(dir, "none.json"), sum, "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing manifest: %v", err)
	}
}

// A restore never writes outside its directory, whatever the manifest says.
func TestRestoreRefusesEscapes(t *testing.T) {
	store := &Store{dir: t.TempDir()}
	for _, p := range []string{"../x", "/etc/x", "a/../../x"} {
		m := &Manifest{Version: 1, Entries: []Entry{{Path: p, Kind: "dir", Mode: 0o755}}}
		if err := RestoreTree(context.Background(), m, store, filepath.Join(t.TempDir(), "r"), Owner{}); err == nil {
			t.Errorf("entry %q restored", p)
		}
	}
}
