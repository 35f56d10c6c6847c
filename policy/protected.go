package policy

import (
	"path"
	"slices"
)

// protectedConfig lists workspace-relative paths whose contents make
// programs outside the sandbox run code when the user later works in the
// workspace (runs git, opens a shell or an editor, starts an agent), with
// why. Writes to them (and creating them) are denied when protect_config is
// on. Build files (Makefile, package.json, ...) are not listed: running a
// project's build is an explicit act on code the user must review anyway.
var protectedConfig = []struct{ path, why string }{
	{".git/hooks", "git runs hooks on commit, checkout, merge, push"},
	{".git/config", "core.hooksPath, core.fsmonitor, core.sshCommand, core.pager, filter/diff drivers and ! aliases run commands"},
	{".git/modules", "submodules' own git dirs: their hooks and config, as above"},
	{".git/info/attributes", "selects filter and diff drivers for paths"},
	{".gitconfig", "git config in a workspace that is $HOME"},
	{".config/git", "git config (XDG location) in a workspace that is $HOME"},
	{".bashrc", "run by every interactive bash"},
	{".bash_profile", "run by bash login shells"},
	{".bash_login", "run by bash login shells"},
	{".bash_logout", "run when a bash login shell exits"},
	{".profile", "run by sh/bash login shells"},
	{".zshrc", "run by every interactive zsh"},
	{".zshenv", "run by every zsh, even scripts"},
	{".zprofile", "run by zsh login shells"},
	{".zlogin", "run by zsh login shells"},
	{".zlogout", "run when a zsh login shell exits"},
	{".config/fish", "fish's config.fish and conf.d run at start"},
	{".envrc", "direnv runs it on cd into the directory"},
	{".ssh", "authorized_keys and ssh config (ProxyCommand, LocalCommand) in a workspace that is $HOME"},
	{".vscode/settings.json", "sets interpreters, formatters, terminal env and shell the editor runs"},
	{".vscode/tasks.json", "tasks can run on folder open"},
	{".vscode/launch.json", "debug configurations run preLaunchTask commands"},
	{".idea", "JetBrains run configurations and startup tasks"},
	{".devcontainer", "initializeCommand runs on the host when the folder is opened in a dev container"},
	{".claude/settings.json", "Claude Code hooks run shell commands; permissions widen what it may do"},
	{".claude/settings.local.json", "as .claude/settings.json"},
	{".mcp.json", "project MCP servers are commands the agent host starts"},
	{".cursor/mcp.json", "Cursor project MCP servers are commands"},
	{".gemini/settings.json", "Gemini CLI project MCP servers and tool commands"},
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
