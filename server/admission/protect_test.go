package admission

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// The files API refuses renaming a config directory away as the backends
// do (config-dir-away: it could not be moved back), and still lets a
// plain directory or a file named .git move.
func TestProtectionRenameAway(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
	os.MkdirAll(filepath.Join(ws, "plain"), 0o755)
	os.MkdirAll(filepath.Join(ws, "wt"), 0o755)
	os.WriteFile(filepath.Join(ws, "wt", ".git"), []byte("gitdir: ../x\n"), 0o644)
	pr := &Protection{ws: ws, in: "/workspace", guard: &policy.ConfigGuard{Config: true}}
	if err := pr.CheckRename("/workspace/sub/.git", "/workspace/sub/.git2"); !errors.Is(err, sandbox.ErrPermission) {
		t.Errorf("rename .git away: %v", err)
	}
	if err := pr.CheckRename("/workspace/plain", "/workspace/plain2"); err != nil {
		t.Errorf("rename a plain directory: %v", err)
	}
	if err := pr.CheckRename("/workspace/wt/.git", "/workspace/wt/.git-file"); err != nil {
		t.Errorf("rename a .git file: %v", err)
	}
}
