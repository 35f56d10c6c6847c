package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
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
	store := &objectStore{dir: filepath.Join(t.TempDir(), "objects")}
	m, stored, skipped, err := scanTree(src, owner{}, store, newScan(context.Background(), "test", manifestVersion))
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	if stored != int64(len("alpha")+len("beta")) {
		t.Errorf("stored %d bytes: equal contents must be stored once", stored)
	}
	if err := store.verify(context.Background(), m, "test"); err != nil {
		t.Fatal(err)
	}
	if err := restoreTree(context.Background(), m, store, dst, owner{}); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := scanTree(dst, owner{}, nil, newScan(context.Background(), "test", manifestVersion))
	if err != nil {
		t.Fatal(err)
	}
	if err := compareManifests(m, got, "restored"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, ".hidden"), []byte("gamma"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, _, _ = scanTree(dst, owner{}, nil, newScan(context.Background(), "test", manifestVersion))
	err = compareManifests(m, got, "changed")
	var he *httpError
	if !errors.As(err, &he) || he.code != api.CodeCorrupt || !strings.Contains(err.Error(), `".hidden"`) {
		t.Fatalf("a changed file: %v", err)
	}
	// Tamper with the stored content of "a.txt" (and "d/e/c": the same).
	for _, e := range m.Entries {
		if e.Path == "a.txt" {
			os.Chmod(store.path(e.SHA256), 0o600)
			os.WriteFile(store.path(e.SHA256), []byte("evil"), 0o600)
		}
	}
	if err := store.verify(context.Background(), m, "tampered"); !errors.As(err, &he) || he.code != api.CodeCorrupt || !strings.Contains(err.Error(), `"a.txt"`) {
		t.Fatalf("tampered object: %v", err)
	}
}

// A manifest whose bytes changed is refused.
func TestManifestHashChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.json")
	sum, err := writeManifest(p, &manifest{Version: 1, Entries: []manifestEntry{{Path: "a", Kind: "file", SHA256: strings.Repeat("0", 64)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(p, sum, "ok"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte(`{"version":1,"entries":[]}`), 0o600)
	if _, err := readManifest(p, sum, "changed"); err == nil || !strings.Contains(err.Error(), "was changed") {
		t.Fatalf("changed manifest: %v", err)
	}
	if _, err := readManifest(filepath.Join(dir, "none.json"), sum, "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing manifest: %v", err)
	}
}

// A restore never writes outside its directory, whatever the manifest says.
func TestRestoreRefusesEscapes(t *testing.T) {
	store := &objectStore{dir: t.TempDir()}
	for _, p := range []string{"../x", "/etc/x", "a/../../x"} {
		m := &manifest{Version: 1, Entries: []manifestEntry{{Path: p, Kind: "dir", Mode: 0o755}}}
		if err := restoreTree(context.Background(), m, store, filepath.Join(t.TempDir(), "r"), owner{}); err == nil {
			t.Errorf("entry %q restored", p)
		}
	}
}

// The reaper's rule for keep_alive {while: processes}.
func TestExpiredWhileProcesses(t *testing.T) {
	ls := &lifeState{keepWhile: api.KeepAliveWhileProcesses, keepIdle: 10}
	now := time.Unix(1000, 0)
	if ls.expiredWhile(true, now, 0, 1) {
		t.Error("expired while a process runs")
	}
	if ls.expiredWhile(true, now.Add(5), 0, 0) {
		t.Error("expired within its idle time after the last process")
	}
	if !ls.expiredWhile(true, now.Add(11), 0, 0) {
		t.Error("not expired past its idle time")
	}
	if ls.expiredWhile(false, now.Add(100), 0, 0) {
		t.Error("expired before its timeout")
	}
	plain := &lifeState{}
	if !plain.expiredWhile(true, now, 0, 1) {
		t.Error("keep_alive false: a process must not keep it")
	}
}
