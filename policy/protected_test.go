package policy

import (
	"path"
	"strings"
	"testing"
)

// fakeDir is a GuardDir over a set of existing paths.
type fakeDir struct {
	p     string
	exist map[string]bool
}

func (d fakeDir) Path() string        { return d.p }
func (d fakeDir) Has(rel string) bool { return d.exist[path.Join(d.p, rel)] }
func (d fakeDir) Parent() GuardDir {
	if d.p == "/" {
		return nil
	}
	return fakeDir{path.Dir(d.p), d.exist}
}

func tree(paths ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		for ; p != "/"; p = path.Dir(p) {
			m[p] = true
		}
	}
	return m
}

func TestConfigGuard(t *testing.T) {
	fs := tree(
		"/ws/.git/HEAD", "/ws/.git/objects", "/ws/.git/refs/heads/config", "/ws/.git/config", "/ws/.git/hooks/pre-commit",
		"/ws/.git/modules/sub/HEAD", "/ws/.git/worktrees/wt/commondir",
		"/ws/a/b/c/.git/HEAD", // a nested repository at depth 3
		"/ws/bare.git/HEAD", "/ws/bare.git/objects", "/ws/bare.git/refs", "/ws/bare.git/config",
		"/ws/plain/config", "/ws/hooked/hooks/x",
		"/ws/.vscode/x", "/ws/.idea/workspace.xml", "/ws/x/.claude/y",
		"/ws/policy.yaml", "/home/u/.ssh/config",
	)
	g := &ConfigGuard{
		Config:   true,
		Homes:    []string{"/ws", "/home/u"},
		Writable: []string{"/ws/allowed"},
		Pinned:   map[string]string{"/ws/policy.yaml": "policy file"},
	}
	for _, c := range []struct {
		op   GuardOp
		dir  string
		name string
		rule string // "" allowed
	}{
		{OpWrite, "/ws/.git", "config", RuleGitConfig},
		{OpCreate, "/ws/.git", "config.lock", RuleGitConfig},
		{OpRenameFile, "/ws/.git", "config", RuleGitConfig},
		{OpCreate, "/ws/.git", "index.lock", ""},
		{OpRenameFile, "/ws/.git", "HEAD", ""},
		{OpCreate, "/ws/.git/refs/heads", "config", ""}, // a branch named config
		{OpMkdir, "/ws/.git", "hooks", RuleGitHooks},
		{OpCreate, "/ws/.git/hooks", "post-checkout", RuleGitHooks},
		{OpChmodExec, "/ws/.git/hooks", "pre-commit", RuleGitHooks},
		{OpMkdir, "/ws/.git", "info", ""},
		{OpCreate, "/ws/.git/info", "attributes", RuleGitAttributes},
		{OpCreate, "/ws/.git/info", "exclude", ""},
		{OpCreate, "/ws/.git/modules/sub", "config", RuleGitConfig},
		{OpCreate, "/ws/.git/worktrees/wt", "config.worktree", RuleGitConfig},
		{OpCreate, "/ws/.git/worktrees/wt", "commondir", ""},
		{OpCreate, "/ws/wt", ".git", ""}, // a worktree's .git file
		{OpRenameDir, "/ws/.git", "modules", RuleGitDirRename},
		// depth 3, and a repository being created
		{OpWrite, "/ws/a/b/c/.git", "config", RuleGitConfig},
		{OpMkdir, "/ws/a/b/c/.git", "hooks", RuleGitHooks},
		{OpMkdir, "/ws/new/repo", ".git", ""},
		{OpCreate, "/ws/new/repo/.git", "config", RuleGitConfig},
		// shapes: a bare repository, and one being assembled
		{OpWrite, "/ws/bare.git", "config", RuleGitConfig},
		{OpCreate, "/ws/plain", "HEAD", RuleGitNewRepo},
		{OpMkdir, "/ws/hooked", "objects", RuleGitNewRepo},
		{OpCreate, "/ws/plain", "notes", ""},
		{OpWrite, "/ws/plain", "config", ""},
		// anchors
		{OpRenameDir, "/ws", ".git", RuleAnchor},
		{OpMoveAway, "/ws/vendor/sub", ".git", RuleAnchorAway}, // could not come back
		{OpMoveAway, "/ws", ".vscode", RuleAnchorAway},
		{OpMoveAway, "/ws", ".git2", ""},
		{OpMoveAway, "/ws/allowed", ".git", ""},
		{OpSymlink, "/ws/a/b", ".vscode", RuleAnchor},
		{OpRenameFile, "/ws/a", ".git", ""},
		{OpMkdir, "/ws/a", ".vscode", ""},
		// editors and agents at any depth
		{OpCreate, "/ws/a/b/c", ".envrc", RuleEnvrc},
		{OpCreate, "/ws/.vscode", "tasks.json", RuleEditor},
		{OpCreate, "/ws/a/b/c/.vscode", "settings.json", RuleEditor},
		{OpCreate, "/ws/.vscode", "notes.md", ""},
		{OpCreate, "/ws/.idea", "runConfigurations", RuleEditor},
		{OpCreate, "/ws/.idea/a/b", "x.xml", RuleEditor},
		{OpCreate, "/ws/x/.claude", "settings.json", RuleAgent},
		{OpCreate, "/ws/x/.claude", "notes.md", ""},
		{OpCreate, "/ws/deep/er", ".mcp.json", RuleAgent},
		{OpCreate, "/home/u/.codex", "config.toml", RuleAgent},
		// homes
		{OpCreate, "/ws", ".bashrc", RuleShell},
		{OpCreate, "/ws/sub", ".bashrc", ""},
		{OpCreate, "/home/u/.ssh", "authorized_keys", RuleShell},
		{OpRenameDir, "/home/u", ".config", RuleShell},
		{OpCreate, "/home/u/.config/git", "config", RuleShell},
		// exemption and pins
		{OpCreate, "/ws/allowed/.git", "config", ""},
		{OpWrite, "/ws", "policy.yaml", RulePinned},
		{OpLinkSource, "/ws", "policy.yaml", RulePinned},
		{OpRenameDir, "/", "ws", RulePinned},
		{OpChmodExec, "/ws", "policy.yaml", ""},
	} {
		d := &Denial{}
		d = g.Check(c.op, fakeDir{c.dir, fs}, c.name)
		got := ""
		if d != nil {
			got = d.Rule
			if d.Path != path.Join(c.dir, c.name) || d.Op != c.op.String() {
				t.Errorf("denial %+v names the wrong path or op", d)
			}
		}
		if got != c.rule {
			t.Errorf("%s %s/%s: rule %q, want %q", c.op, c.dir, c.name, got, c.rule)
		}
	}
	off := &ConfigGuard{Pinned: g.Pinned}
	if d := off.Check(OpWrite, fakeDir{"/ws/.git", fs}, "config"); d != nil {
		t.Errorf("protect_config off still denies: %+v", d)
	}
	if d := off.Check(OpWrite, fakeDir{"/ws", fs}, "policy.yaml"); d == nil {
		t.Error("protect_config off unpins the policy file")
	}
}

func TestGuardRulesDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range GuardRules() {
		if r.ID == "" || r.Paths == "" || r.Why == "" || seen[r.ID] {
			t.Errorf("rule %+v incomplete or duplicated", r)
		}
		seen[r.ID] = true
		if GuardRuleWhy(r.ID) != r.Why || strings.TrimSpace(r.Why) != r.Why {
			t.Errorf("rule %s: GuardRuleWhy mismatch", r.ID)
		}
	}
}
