package policy

import (
	"path"
	"slices"
	"strings"
)

// Protected configuration: files that make a program *outside* the sandbox
// run code later (git, a shell, an editor, an agent host), wherever in a
// writable host path they are. The rules below are the one implementation
// every backend that writes host files enforces (native through its write
// mediator, wasm in its file layer): ConfigGuard.Check decides one
// operation on one directory entry.

// Rule IDs, as audit events and the run summary name them.
const (
	RuleGitConfig     = "git-config"      // config and config.* of a git directory
	RuleGitHooks      = "git-hooks"       // hooks/ of a git directory, and everything in it
	RuleGitAttributes = "git-attributes"  // info/attributes of a git directory
	RuleGitNewRepo    = "git-new-repo"    // making a directory that holds config or hooks into a git directory
	RuleGitDirRename  = "git-dir-rename"  // moving a directory into a git directory
	RuleAnchor        = "config-dir"      // a directory or symlink moved or linked to a config directory's name
	RuleAnchorAway    = "config-dir-away" // a config directory (or a symlink so named) moved away from its name
	RuleEnvrc         = "envrc"           // .envrc
	RuleEditor        = "editor"          // .vscode settings/tasks/launch/mcp, .idea, .devcontainer
	RuleAgent         = "agent-settings"  // agent hooks and MCP servers
	RuleShell         = "home-config"     // shell rc files, ~/.ssh, git and fish config in a home directory
	RulePinned        = "pinned"          // the sandbox's own policy, secret files, the airlock binary
	RuleSetID         = "set-id"          // set-uid/set-gid bits on a host file
)

// GuardRule describes one rule for documentation and messages.
type GuardRule struct {
	ID    string
	Paths string // what it protects, in the docs' words
	Why   string // what outside the sandbox runs it
}

var guardRules = []GuardRule{
	{RuleGitConfig, "`config`, `config.*` of any git directory (`.git`, `.git/modules/...`, `.git/worktrees/*`, or any directory holding `HEAD` and `objects`+`refs` or `commondir`)",
		"`core.hooksPath`, `core.fsmonitor`, `core.sshCommand`, `core.pager`, filter and diff drivers and `!` aliases run commands"},
	{RuleGitHooks, "`hooks/` of any git directory, and everything below it", "git runs hooks on commit, checkout, merge, push"},
	{RuleGitAttributes, "`info/attributes` of any git directory", "selects filter and diff drivers (commands) for paths"},
	{RuleGitNewRepo, "`HEAD`, `objects`, `refs`, `commondir` added to a directory that holds `config` or `hooks`",
		"it would become a git directory whose config was written inside the sandbox (`git init` of a new repository)"},
	{RuleGitDirRename, "a directory moved into a git directory", "it could bring a config or hooks written elsewhere"},
	{RuleAnchor, "a directory or symlink moved or linked to `.git`, `.vscode`, `.idea`, `.claude`, `.codex`, `.cursor`, `.gemini`, `.devcontainer`",
		"it could bring settings written under another name"},
	{RuleAnchorAway, "a directory or symlink named `.git`, `.vscode`, `.idea`, `.claude`, `.codex`, `.cursor`, `.gemini`, `.devcontainer` moved to another name",
		"moving it back would be refused (config-dir), so the repository or settings would be lost to the host for good: renames that cannot be undone are refused both ways"},
	{RuleEnvrc, "`.envrc`", "direnv runs it when you `cd` into the directory"},
	{RuleEditor, "`.vscode/{settings,tasks,launch,mcp}.json`, `.idea/`, `.devcontainer/`, `.devcontainer.json`",
		"editors run interpreters, tasks on folder open, debug pre-launch tasks, dev-container `initializeCommand` and MCP servers from them"},
	{RuleAgent, "`.claude/settings.json`, `.claude/settings.local.json`, `.mcp.json`, `.cursor/mcp.json`, `.gemini/settings.json`, `.codex/config.toml`",
		"agent hooks and MCP servers are commands the agent host starts"},
	{RuleShell, "`.bashrc .bash_profile .bash_login .bash_logout .profile .zshrc .zshenv .zprofile .zlogin .zlogout .gitconfig`, `.ssh/`, `.config/git/`, `.config/fish/` in a home directory (the workspace root, or your `$HOME` when a writable path holds it)",
		"shells run them at start; ssh config runs `ProxyCommand`; git config runs commands"},
	{RulePinned, "the policy file, secret files and the airlock binary, when a writable path holds them", "the sandbox could widen its own next run"},
	{RuleSetID, "set-uid and set-gid bits on anything the host sees", "any host user who runs the file would run it as its owner"},
}

// GuardRules returns every protection rule, for docs and messages.
func GuardRules() []GuardRule { return slices.Clone(guardRules) }

// GuardRuleWhy returns why rule id exists ("" for an unknown id).
func GuardRuleWhy(id string) string {
	for _, r := range guardRules {
		if r.ID == id {
			return r.Why
		}
	}
	return ""
}

// GuardOp is what an operation does to a directory entry.
type GuardOp int

// Operations ConfigGuard.Check decides.
const (
	OpCreate     GuardOp = iota // a new file, device node or fifo
	OpMkdir                     // a new directory
	OpSymlink                   // a new symlink
	OpLink                      // a new hard link (the new name)
	OpLinkSource                // the existing file a hard link is made to
	OpRenameFile                // a non-directory renamed (or exchanged) to this name
	OpRenameDir                 // a directory renamed (or exchanged) to this name
	OpWrite                     // an existing file opened for writing or truncated
	OpChmodExec                 // execute bits set on an existing entry
	OpMoveAway                  // a directory or symlink renamed (or exchanged) away from this name
)

var opNames = [...]string{"create", "mkdir", "symlink", "link", "link from", "rename", "rename directory", "write", "chmod +x", "rename away"}

func (o GuardOp) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op"
}

// GuardDir is a directory as ConfigGuard sees it: its canonical path inside
// the sandbox, and probes of what it holds. Implementations answer from the
// real filesystem (the native mediator holds the directory open).
type GuardDir interface {
	Path() string
	// Has reports whether rel (relative, possibly several components)
	// exists below this directory, without following a final symlink.
	Has(rel string) bool
	// Parent returns the parent directory, nil at the root.
	Parent() GuardDir
}

// Denial is a refused operation: which rule, on what path.
type Denial struct {
	Rule string `json:"rule"`
	Path string `json:"path"`
	Op   string `json:"op"`
}

// ConfigGuard decides which writes to host-backed paths are refused. The
// zero value refuses nothing but set-id bits (which callers check on the
// mode themselves).
type ConfigGuard struct {
	// Config turns the configuration rules on (filesystem.protect_config).
	Config bool
	// Homes are directories treated as a home (RuleShell): the workspace
	// root and the caller's $HOME.
	Homes []string
	// Writable are paths below which the configuration rules are off
	// (filesystem.writable_config); pinned paths stay pinned.
	Writable []string
	// Pinned are exact paths that are never written, created or linked
	// (RulePinned), with what each is ("policy file").
	Pinned map[string]string
}

// Relocate moves the guard's paths below host (a host directory) to the
// same place below inside (where the sandbox sees it): the workspace
// mounted at a stable path (/workspace) is judged by the paths the
// sandbox uses.
func (g *ConfigGuard) Relocate(host, inside string) {
	if host == inside || host == "" || inside == "" {
		return
	}
	move := func(p string) string {
		if p == host {
			return inside
		}
		if rest, ok := strings.CutPrefix(p, host+"/"); ok {
			return inside + "/" + rest
		}
		return p
	}
	for i, h := range g.Homes {
		g.Homes[i] = move(h)
	}
	for i, w := range g.Writable {
		g.Writable[i] = move(w)
	}
	pinned := make(map[string]string, len(g.Pinned))
	for p, what := range g.Pinned {
		pinned[move(p)] = what
	}
	g.Pinned = pinned
}

// anchors are directory names whose contents the rules protect: moving a
// directory or a symlink to one of these names is refused.
var anchors = []string{".git", ".vscode", ".idea", ".claude", ".codex", ".cursor", ".gemini", ".devcontainer"}

var homeLeaves = []string{".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".gitconfig"}

// Check decides op on the entry name of directory d: nil allows it.
func (g *ConfigGuard) Check(op GuardOp, d GuardDir, name string) *Denial {
	full := path.Join(d.Path(), name)
	deny := func(rule string) *Denial { return &Denial{Rule: rule, Path: full, Op: op.String()} }
	if op == OpMoveAway {
		// The mirror of RuleAnchor: what could not come back may not go.
		if g.Config && !underAny(full, g.Writable) && slices.Contains(anchors, name) {
			return deny(RuleAnchorAway)
		}
		return nil
	}
	dirMove := op == OpRenameDir || op == OpSymlink
	if g.pinned(full, op, dirMove) {
		return deny(RulePinned)
	}
	if !g.Config || underAny(full, g.Writable) {
		return nil
	}
	if rule := g.protectedTree(d, full, dirMove); rule != "" {
		return deny(rule)
	}
	if dirMove && slices.Contains(anchors, name) {
		return deny(RuleAnchor)
	}
	base := path.Base(d.Path())
	switch {
	case name == ".envrc":
		return deny(RuleEnvrc)
	case name == ".devcontainer.json",
		base == ".vscode" && slices.Contains([]string{"settings.json", "tasks.json", "launch.json", "mcp.json"}, name):
		return deny(RuleEditor)
	case base == ".claude" && (name == "settings.json" || name == "settings.local.json"),
		name == ".mcp.json",
		base == ".cursor" && name == "mcp.json",
		base == ".gemini" && name == "settings.json",
		base == ".codex" && name == "config.toml":
		return deny(RuleAgent)
	case slices.Contains(homeLeaves, name) && slices.Contains(g.Homes, d.Path()):
		return deny(RuleShell)
	}
	if gitDirLike(d) {
		switch {
		case name == "config" || strings.HasPrefix(name, "config."):
			return deny(RuleGitConfig)
		case name == "hooks":
			return deny(RuleGitHooks)
		case op == OpRenameDir:
			return deny(RuleGitDirRename) // could bring a module's config or an info/attributes
		case op == OpSymlink && (name == "info" || name == "modules" || name == "worktrees"):
			return deny(RuleGitDirRename)
		}
		return nil
	}
	if base == "info" && strings.HasPrefix(name, "attributes") {
		if p := d.Parent(); p != nil && gitDirLike(p) {
			return deny(RuleGitAttributes)
		}
	}
	switch name {
	case "HEAD", "commondir", "objects", "refs":
		if d.Has("config") || d.Has("config.worktree") || d.Has("hooks") || d.Has("info/attributes") {
			return deny(RuleGitNewRepo)
		}
	}
	return nil
}

// pinned reports whether op would change a pinned path: write, create,
// link or rename onto it, link from it, or replace a directory holding it.
func (g *ConfigGuard) pinned(full string, op GuardOp, dirMove bool) bool {
	if _, ok := g.Pinned[full]; ok {
		return op != OpChmodExec
	}
	if dirMove {
		for p := range g.Pinned {
			if strings.HasPrefix(p, full+"/") {
				return true
			}
		}
	}
	return false
}

// homeTrees are directories of a home whose whole contents are protected.
var homeTrees = []string{".ssh", ".config/git", ".config/fish"}

// protectedTree returns the rule of a protected directory that holds the
// entry full (d's child): .idea, .devcontainer and a git directory's hooks
// anywhere, .ssh, .config/git and .config/fish of a home. A directory
// moved or linked onto one of the home trees (or onto .config) is refused
// too. Only a "hooks" component costs probes (is its parent a git dir?).
func (g *ConfigGuard) protectedTree(d GuardDir, full string, dirMove bool) string {
	for _, h := range g.Homes {
		rel, ok := strings.CutPrefix(full, h+"/")
		if !ok {
			continue
		}
		for _, t := range homeTrees {
			if strings.HasPrefix(rel, t+"/") || dirMove && (rel == t || rel == ".config") {
				return RuleShell
			}
		}
	}
	comps := strings.Split(strings.TrimPrefix(full, "/"), "/")
	last := len(comps) - 1
	for i := last - 1; i >= 0; i-- {
		switch comps[i] {
		case ".idea", ".devcontainer":
			return RuleEditor
		case "hooks":
			// The directory holding this hooks is d's ancestor at
			// depth i; walk up to it.
			anc := d
			for j := last - 1; j > i-1 && anc != nil; j-- {
				anc = anc.Parent()
			}
			if anc != nil && gitDirLike(anc) {
				return RuleGitHooks
			}
		}
	}
	return ""
}

// gitDirLike reports whether d is (or could be read as) a git directory:
// named .git, a module's or worktree's git directory below a .git, or
// shaped like one (HEAD with objects+refs, or with commondir).
func gitDirLike(d GuardDir) bool {
	p := d.Path()
	if path.Base(p) == ".git" {
		return true
	}
	if i := strings.LastIndex(p, "/.git/"); i >= 0 {
		rest := strings.Split(p[i+len("/.git/"):], "/")
		switch {
		case rest[0] == "modules" && len(rest) >= 2:
			return true
		case rest[0] == "worktrees" && len(rest) == 2:
			return true
		}
	}
	return d.Has("HEAD") && (d.Has("commondir") || d.Has("objects") && d.Has("refs"))
}

func underAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || r == "/" || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
