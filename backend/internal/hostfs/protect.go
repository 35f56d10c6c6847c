package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/policy"
)

// BindKind says what a protection bind is for.
type BindKind int

const (
	// AnchorBind is an existing directory that holds protected entries (.git,
	// .vscode, .claude, ...): a writable self-bind that makes it a mount
	// point, so it cannot be renamed away and re-created without the
	// protected entries (EBUSY).
	AnchorBind BindKind = iota
	// ReadOnlyBind is an existing protected path: a read-only self-bind.
	ReadOnlyBind
	// PlaceholderBind is a missing protected path (or its topmost missing
	// parent): a read-only self-bind of an empty file the host creates
	// there first (see CreatePlaceholders).
	PlaceholderBind
)

// Bind is one self-bind (source and destination are Path) protecting
// workspace config.
type Bind struct {
	Path string
	Kind BindKind
	Dir  bool // Path is a directory (AnchorBind, and ReadOnlyBind of a directory)
}

// ProtectConfig plans the self-binds protecting the workspace ws's config
// paths (absolute paths below ws) and returns the placeholders to create,
// in order, before mounting; it changes nothing on the host. A missing path
// whose parent is missing too gets its topmost missing parent as the
// placeholder: an empty read-only file there blocks creating anything
// below. Paths reached through a symlink are left alone (a mount would land
// on the link's target while the link stays replaceable): a documented
// limitation, never followed.
func ProtectConfig(ws string, paths []string) ([]Bind, []string, error) {
	var binds []Bind
	var pending []string
	// Without a .git directory, .git/hooks and .git/config are missing like
	// any protected path, so .git itself gets the placeholder: an agent
	// cannot turn a plain workspace into a repository whose config (say
	// core.fsmonitor) a git prompt on the host would later run.
	gi, gerr := os.Lstat(filepath.Join(ws, ".git"))
	gitFile := gerr == nil && gi.Mode().IsRegular()
	for _, a := range policy.ProtectedConfigAnchors() {
		dir := filepath.Join(ws, a)
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && !behindSymlink(ws, dir) {
			binds = append(binds, Bind{Path: dir, Kind: AnchorBind, Dir: true})
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		rel, err := filepath.Rel(ws, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if strings.HasPrefix(rel, ".git/") && gitFile {
			// A worktree's or submodule's .git file names the real git
			// directory: rewritten, it could point git at a hostile config
			// inside the workspace. The file itself is pinned read-only.
			p = filepath.Join(ws, ".git")
		}
		if coveredBy(p, pending) {
			continue // below a placeholder for a missing parent
		}
		if behindSymlink(ws, p) {
			continue
		}
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			continue
		case err == nil:
			if !seen[p] {
				binds = append(binds, Bind{Path: p, Kind: ReadOnlyBind, Dir: fi.IsDir()})
				seen[p] = true
			}
			continue
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil, nil, fmt.Errorf("protect %s: %w", p, err)
		}
		target := topMissing(ws, p)
		if seen[target] {
			continue
		}
		seen[target] = true
		pending = append(pending, target)
		binds = append(binds, Bind{Path: target, Kind: PlaceholderBind})
	}
	return binds, pending, nil
}

func coveredBy(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// behindSymlink reports whether an existing ancestor of p below ws is a
// symlink.
func behindSymlink(ws, p string) bool {
	for d := filepath.Dir(p); len(d) > len(ws); d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// topMissing returns the topmost missing ancestor of p below ws (or p).
func topMissing(ws, p string) string {
	top := p
	for d := filepath.Dir(p); len(d) > len(ws); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
	}
	return top
}
