package writeback

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

func TestReadEntriesRejectsBadPaths(t *testing.T) {
	for _, line := range []string{
		`{"p":"../x","t":"f"}`, `{"p":"/etc/passwd","t":"f"}`, `{"p":"a/../../b","t":"f"}`,
		`{"p":"a","t":"c"}`, `{"p":"","t":"d"}`, `{"p":"a","t":"f","s":-1}`, `not json`,
	} {
		if _, err := ReadEntries(strings.NewReader(line)); err == nil {
			t.Errorf("accepted %s", line)
		}
	}
}

// TestSyncTrees plays both sides on the host: a "sandbox" tree (what an
// overlay would hold) is written back to a "host" tree through the guard.
func TestSyncTrees(t *testing.T) {
	inside, host := t.TempDir(), t.TempDir()
	write := func(root, rel, data string) {
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), []byte(data), 0o644)
	}
	for _, r := range []string{inside, host} {
		write(r, "keep.txt", "same")
		write(r, ".git/HEAD", "ref: refs/heads/main\n")
		write(r, ".git/config", "[core]\n")
		os.MkdirAll(filepath.Join(r, ".git/objects"), 0o755)
		os.MkdirAll(filepath.Join(r, ".git/refs"), 0o755)
	}
	// Same mtimes for what is unchanged.
	old := time.Now().Add(-time.Hour)
	filepath.Walk(inside, func(p string, _ os.FileInfo, _ error) error { os.Chtimes(p, old, old); return nil })
	filepath.Walk(host, func(p string, _ os.FileInfo, _ error) error { os.Chtimes(p, old, old); return nil })
	since := time.Now().Add(-time.Minute).UnixNano()
	write(host, "removed.txt", "x")
	os.Chtimes(filepath.Join(host, "removed.txt"), old, old)
	write(inside, "new/dir/file.txt", "made inside")
	write(inside, ".git/config", "[core]\n\tfsmonitor = evil\n")
	write(inside, "sub/.envrc", "evil")
	os.Symlink("keep.txt", filepath.Join(inside, "link"))
	os.Chmod(filepath.Join(inside, "keep.txt"), 0o4755)
	os.MkdirAll(filepath.Join(inside, "masked"), 0o755)
	write(host, "masked/secret", "s")

	var listing bytes.Buffer
	if err := Walk(inside, &listing); err != nil {
		t.Fatal(err)
	}
	in, err := ReadEntries(&listing)
	if err != nil {
		t.Fatal(err)
	}
	h, err := List(host)
	if err != nil {
		t.Fatal(err)
	}
	changes := Plan(in, h, func(rel string) bool { return rel == "masked" || strings.HasPrefix(rel, "masked/") })
	var denied []policy.Denial
	res := Apply(Target{
		Root: host, Guard: &policy.ConfigGuard{Config: true}, UID: -1, GID: -1, Since: since,
		Open:   func(rel string) (io.ReadCloser, error) { return os.Open(filepath.Join(inside, rel)) },
		Report: func(d policy.Denial) { denied = append(denied, d) },
	}, h, changes)
	if len(res.Errors) > 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "new/dir/file.txt")); string(b) != "made inside" {
		t.Errorf("new file: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(host, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config written back: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(host, "sub/.envrc")); err == nil {
		t.Error(".envrc written back")
	}
	if _, err := os.Lstat(filepath.Join(host, "removed.txt")); err == nil {
		t.Error("removed.txt kept")
	}
	if l, _ := os.Readlink(filepath.Join(host, "link")); l != "keep.txt" {
		t.Errorf("link %q", l)
	}
	if fi, _ := os.Stat(filepath.Join(host, "keep.txt")); fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("keep.txt mode %v: want 0755 without set-uid", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(host, "masked/secret")); string(b) != "s" {
		t.Error("a skipped path was synced")
	}
	if len(denied) != 2 || res.Denied != 2 {
		t.Errorf("denied %v (%d)", denied, res.Denied)
	}
}

// An unreadable directory inside never removes what the host has below it.
func TestUnknownNeverRemoves(t *testing.T) {
	in := map[string]Entry{"d": {Path: "d", Type: "x"}}
	h := map[string]Entry{"d": {Path: "d", Type: "d"}, "d/f": {Path: "d/f", Type: "f"}, "e": {Path: "e", Type: "f"}}
	changes := Plan(in, h, nil)
	if len(changes) != 1 || changes[0].Op != "remove" || changes[0].Entry.Path != "e" {
		t.Errorf("changes %+v, want only e removed", changes)
	}
}
