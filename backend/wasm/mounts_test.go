package wasm

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func testTable(t testing.TB) (*mountTable, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	priv := filepath.Join(base, "priv")
	os.MkdirAll(filepath.Join(ws, "secret"), 0o755)
	os.MkdirAll(priv, 0o755)
	tbl := &mountTable{}
	if err := tbl.add(ws, ws, mountOpts{deny: []string{filepath.Join(ws, "secret")}}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.add("/tmp", priv, mountOpts{private: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tbl.close)
	return tbl, ws
}

func TestResolve(t *testing.T) {
	tbl, ws := testTable(t)
	for _, tc := range []struct {
		in    string
		guest string // mount
		rel   string
		kind  error
	}{
		{ws, ws, ".", nil},
		{ws + "/a/b", ws, "a/b", nil},
		{ws + "/a/../b", ws, "b", nil},
		{ws + "/../ws/c", ws, "c", nil},
		{"/tmp//x/", "/tmp", "x", nil},
		{"/tmp", "/tmp", ".", nil},
		{ws + "/secret", "", "", sandbox.ErrPermission},
		{ws + "/secret/k", "", "", sandbox.ErrPermission},
		{ws + "/x/../secret/k", "", "", sandbox.ErrPermission},
		{"/etc/passwd", "", "", sandbox.ErrNotFound},
		{"/tmp/../etc", "", "", sandbox.ErrNotFound},
		{"relative", "", "", sandbox.ErrInvalid},
		{"", "", "", sandbox.ErrInvalid},
		{"/tmp/a\x00b", "", "", sandbox.ErrInvalid},
	} {
		m, rel, err := tbl.resolve(tc.in)
		if tc.kind != nil {
			if !errors.Is(err, tc.kind) {
				t.Errorf("resolve(%q) = %v, want %v", tc.in, err, tc.kind)
			}
			continue
		}
		if err != nil || m.guest != tc.guest || rel != tc.rel {
			t.Errorf("resolve(%q) = %v %q %v, want %s %q", tc.in, m, rel, err, tc.guest, tc.rel)
		}
	}
}

// FuzzResolve: whatever path a caller sends, a resolved path stays inside
// its mount and out of denied paths.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"/tmp/x", "/ws/../..", "/ws/secret/../secret", "//tmp/./a", "/tmp/\x00"} {
		f.Add(s)
	}
	tbl, ws := testTable(f)
	f.Fuzz(func(t *testing.T, p string) {
		p = strings.ReplaceAll(p, "/ws", ws)
		m, rel, err := tbl.resolve(p)
		if err != nil {
			return
		}
		if rel != "." && (path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || path.Clean(rel) != rel) {
			t.Fatalf("resolve(%q) = %q: leaves the mount", p, rel)
		}
		if denied(m.rules.deny, rel) {
			t.Fatalf("resolve(%q) = %q: a denied path", p, rel)
		}
	})
}
