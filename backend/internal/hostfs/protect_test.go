package hostfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

func TestProtectConfig(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644)
	os.Mkdir(filepath.Join(ws, ".vscode"), 0o755)
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(ws, ".config"))
	paths := []string{
		filepath.Join(ws, ".git/config"), filepath.Join(ws, ".git/hooks"),
		filepath.Join(ws, ".bashrc"), filepath.Join(ws, ".claude/settings.json"),
		filepath.Join(ws, ".claude/commands"), filepath.Join(ws, ".config/git/config"),
		filepath.Join(ws, ".vscode/tasks.json"), filepath.Join(ws, "../escape"),
	}
	binds, pending, err := ProtectConfig(ws, paths)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Bind{}
	for _, b := range binds {
		if _, dup := got[b.Path]; dup {
			t.Errorf("%s bound twice", b.Path)
		}
		got[b.Path] = b
	}
	want := map[string]BindKind{
		".git": AnchorBind, ".vscode": AnchorBind,
		".git/config": ReadOnlyBind, ".git/hooks": ReadOnlyBind,
		".bashrc": PlaceholderBind, ".claude": PlaceholderBind, ".vscode/tasks.json": PlaceholderBind,
	}
	for rel, kind := range want {
		b, ok := got[filepath.Join(ws, rel)]
		if !ok || b.Kind != kind {
			t.Errorf("%s: bind %+v (present %v), want kind %d", rel, b, ok, kind)
		}
	}
	if len(got) != len(want) {
		t.Errorf("binds %+v, want exactly %v", binds, want)
	}
	if !got[filepath.Join(ws, ".git/hooks")].Dir || got[filepath.Join(ws, ".git/config")].Dir {
		t.Error("Dir wrong for existing paths")
	}
	wantPending := []string{filepath.Join(ws, ".bashrc"), filepath.Join(ws, ".claude"), filepath.Join(ws, ".vscode/tasks.json")}
	slices.Sort(pending)
	if !slices.Equal(pending, wantPending) {
		t.Errorf("pending %v, want %v", pending, wantPending)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Error("planning wrote through the symlink")
	}

	ph, err := CreatePlaceholders(ws, pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(ph) != len(pending) || ph[0].Ino != ph[1].Ino {
		t.Errorf("placeholders %+v: want one shared inode", ph)
	}
	for _, p := range pending {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			t.Errorf("placeholder %s: %v", p, err)
		}
	}
	// A placeholder replaced meanwhile is not ours: it stays.
	os.Remove(filepath.Join(ws, ".bashrc"))
	os.WriteFile(filepath.Join(ws, ".bashrc"), nil, 0o644)
	if err := RemovePlaceholders(ph); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".bashrc")); err != nil {
		t.Error("removed a file that was no longer our placeholder")
	}
	for _, p := range pending[1:] {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("placeholder %s not removed", p)
		}
	}
}

func TestProtectConfigAnchorsAlways(t *testing.T) {
	ws := t.TempDir()
	for _, a := range policy.ProtectedConfigAnchors() {
		os.Mkdir(filepath.Join(ws, a), 0o755)
	}
	binds, pending, err := ProtectConfig(ws, nil)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending %v, err %v", pending, err)
	}
	if len(binds) != len(policy.ProtectedConfigAnchors()) {
		t.Errorf("binds %+v, want one anchor per %v", binds, policy.ProtectedConfigAnchors())
	}
	for _, b := range binds {
		if b.Kind != AnchorBind || !b.Dir {
			t.Errorf("bind %+v, want a directory anchor", b)
		}
	}
}

func TestCreatePlaceholdersNeverFollowsSymlinks(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(ws, "link"))
	ph, err := CreatePlaceholders(ws, []string{filepath.Join(ws, "link", "x")})
	if err == nil {
		RemovePlaceholders(ph)
		t.Fatal("created a placeholder through a symlink")
	}
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("file created outside the workspace")
	}
}
