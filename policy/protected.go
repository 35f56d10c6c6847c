package policy

import (
	"path"
	"slices"
	"strings"
)

// protectedConfig lists workspace-relative paths whose contents make
// programs outside the sandbox run code when the user later works in the
// workspace (runs git, opens a shell or an editor, starts an agent), with
// why. Writes to them (and creating them) are denied when protect_config is
// on. Build files (Makefile, package.json, ...) are not listed: running a
// project's build is an explicit act on code the user must review anyway.
var protectedConfig = []struct {
	path, why string
	dir       bool
}{
	{".git/hooks", "git runs hooks on commit, checkout, merge, push", true},
	{".git/config", "core.hooksPath, core.fsmonitor, core.sshCommand, core.pager, filter/diff drivers and ! aliases run commands", false},
	{".git/modules", "submodules' own git dirs: their hooks and config, as above", true},
	{".git/info/attributes", "selects filter and diff drivers for paths", false},
	{".gitconfig", "git config in a workspace that is $HOME", false},
	{".config/git", "git config (XDG location) in a workspace that is $HOME", true},
	{".bashrc", "run by every interactive bash", false},
	{".bash_profile", "run by bash login shells", false},
	{".bash_login", "run by bash login shells", false},
	{".bash_logout", "run when a bash login shell exits", false},
	{".profile", "run by sh/bash login shells", false},
	{".zshrc", "run by every interactive zsh", false},
	{".zshenv", "run by every zsh, even scripts", false},
	{".zprofile", "run by zsh login shells", false},
	{".zlogin", "run by zsh login shells", false},
	{".zlogout", "run when a zsh login shell exits", false},
	{".config/fish", "fish's config.fish and conf.d run at start", true},
	{".envrc", "direnv runs it on cd into the directory", false},
	{".ssh", "authorized_keys and ssh config (ProxyCommand, LocalCommand) in a workspace that is $HOME", true},
	{".vscode/settings.json", "sets interpreters, formatters, terminal env and shell the editor runs", false},
	{".vscode/tasks.json", "tasks can run on folder open", false},
	{".vscode/launch.json", "debug configurations run preLaunchTask commands", false},
	{".idea", "JetBrains run configurations and startup tasks", true},
	{".devcontainer", "initializeCommand runs on the host when the folder is opened in a dev container", true},
	{".claude/settings.json", "Claude Code hooks run shell commands; permissions widen what it may do", false},
	{".claude/settings.local.json", "as .claude/settings.json", false},
	{".mcp.json", "project MCP servers are commands the agent host starts", false},
	{".cursor/mcp.json", "Cursor project MCP servers are commands", false},
	{".gemini/settings.json", "Gemini CLI project MCP servers and tool commands", false},
}

// ProtectedEntry is one protected workspace path.
type ProtectedEntry struct {
	Path string // workspace-relative, clean, e.g. ".vscode/settings.json"
	Dir  bool   // a directory when it exists (a missing one is pinned by an empty read-only file placeholder)
	Why  string // what outside the sandbox runs it
}

// ProtectedConfig returns the protected workspace paths with their kind
// and reason, sorted by path.
func ProtectedConfig() []ProtectedEntry {
	out := make([]ProtectedEntry, len(protectedConfig))
	for i, p := range protectedConfig {
		out[i] = ProtectedEntry{Path: p.path, Dir: p.dir, Why: p.why}
	}
	slices.SortFunc(out, func(a, b ProtectedEntry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// ProtectedConfigAnchors returns the workspace-relative directories that
// hold protected entries (".git", ".vscode", ".claude", ...). A backend
// must keep each from being renamed or removed while the sandbox runs
// (the native backend binds it onto itself): otherwise
// `mv .vscode x && mkdir .vscode` gives a fresh, unprotected settings.json.
func ProtectedConfigAnchors() []string {
	var out []string
	for _, p := range protectedConfig {
		if top, _, ok := strings.Cut(p.path, "/"); ok && !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	slices.Sort(out)
	return out
}

// ProtectedConfigPaths returns the workspace-relative paths that are write-
// protected when protect_config is on (see docs/policy.md for why each).
func ProtectedConfigPaths() []string {
	out := make([]string, len(protectedConfig))
	for i, p := range protectedConfig {
		out[i] = p.path
	}
	slices.Sort(out)
	return out
}

// ProtectedConfigReason returns why a ProtectedConfigPaths entry is listed.
func ProtectedConfigReason(rel string) string {
	for _, p := range protectedConfig {
		if p.path == rel {
			return p.why
		}
	}
	return ""
}

// ProtectedPaths returns the absolute paths under the workspace whose writes
// a backend must deny (existing or not), for a resolved policy with a
// workspace and protect_config on; nil otherwise.
func (p *Policy) ProtectedPaths() []string {
	ws := p.Filesystem.WorkspacePath()
	if ws == "" || !isAbs(ws) || (p.Filesystem.ProtectConfig != nil && !*p.Filesystem.ProtectConfig) {
		return nil
	}
	rel := ProtectedConfigPaths()
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = path.Join(ws, r)
	}
	return out
}
