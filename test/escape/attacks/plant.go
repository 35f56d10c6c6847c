package main

// Planting code a host program runs later (git, direnv, an editor, an
// agent, a set-uid binary) anywhere in a writable host path: the attacks
// of the workspace-protection issue, at any depth. Pure file operations,
// so they also compile for GOOS=wasip1 (where chmod has no set-id bits).

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

func init() { register("plant", attackPlant) }

// attackPlant plants kind in dir (a git repository's work tree for the
// git kinds). The runner's host check decides: the planted file on the
// host, with the marker, or a set-id bit.
func attackPlant(p params) {
	dir, kind, data := p.get("dir"), p.get("kind"), p.get("data")
	try := func(what string, err error) {
		if err != nil {
			blocked("%s %s: %s: %v", kind, dir, what, err)
		}
	}
	write := func(rel string) {
		try("write "+rel, os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o755))
	}
	mkdir := func(rel string) {
		if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil && !errorsIsExist(err) {
			try("mkdir "+rel, err)
		}
	}
	switch kind {
	case "hook":
		write(".git/hooks/post-checkout")
	case "git-config":
		f, err := os.OpenFile(filepath.Join(dir, ".git/config"), os.O_WRONLY|os.O_APPEND, 0)
		try("open .git/config", err)
		_, err = f.WriteString("[core]\n\tfsmonitor = " + data + "\n")
		try("append .git/config", err)
		f.Close()
	case "config-rename":
		write(".git/config.new")
		try("rename onto .git/config", os.Rename(filepath.Join(dir, ".git/config.new"), filepath.Join(dir, ".git/config")))
	case "new-repo":
		mkdir("new/.git/objects")
		mkdir("new/.git/refs")
		write("new/.git/HEAD")
		write("new/.git/config")
	case "bare-repo":
		mkdir("bare.git")
		write("bare.git/config")
		write("bare.git/HEAD")
		mkdir("bare.git/objects")
		mkdir("bare.git/refs")
	case "envrc":
		write(".envrc")
	case "vscode-tasks":
		mkdir(".vscode")
		write(".vscode/tasks.json")
	case "vscode-swap":
		mkdir("staged")
		write("staged/settings.json")
		try("rename staged to .vscode", os.Rename(filepath.Join(dir, "staged"), filepath.Join(dir, ".vscode")))
	case "claude-settings":
		mkdir(".claude")
		write(".claude/settings.json")
	case "mcp-json":
		write(".mcp.json")
	case "set-uid", "set-gid-dir":
		if runtime.GOOS == "wasip1" {
			notApplicable("WASI has no set-id bits")
		}
		target, mode := filepath.Join(dir, "tool"), fs.FileMode(0o755)|fs.ModeSetuid
		if kind == "set-gid-dir" {
			target, mode = filepath.Join(dir, "shared"), fs.ModeDir|0o775|fs.ModeSetgid
			mkdir("shared")
		} else {
			write("tool")
		}
		try("chmod", os.Chmod(target, mode))
		fi, err := os.Stat(target)
		try("stat", err)
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			blocked("%s: the bit did not stick (%v)", target, fi.Mode())
		}
	case "pinned-policy":
		f, err := os.OpenFile(filepath.Join(dir, "agent.yaml"), os.O_WRONLY|os.O_APPEND, 0)
		try("open agent.yaml", err)
		_, err = f.WriteString("network: {mode: open} # " + data + "\n")
		try("append agent.yaml", err)
		f.Close()
	default:
		fail("unknown kind %q", kind)
	}
	escaped("planted %s in %s", kind, dir)
}

func errorsIsExist(err error) bool { return os.IsExist(err) }
