package hostfs

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/airlock-dev/airlock/policy"
)

// Protected is an existing entry of a writable host tree that the guard
// refuses to let a sandbox write: a backend that cannot mediate writes
// binds it read-only.
type Protected struct {
	Path string
	Dir  bool
	// Anchor: a directory of policy.ConfigDirs that is not itself read-only:
	// bind it onto itself (writable) so that it cannot be renamed away and
	// replaced by one without its protected entries.
	Anchor bool
}

var configDirs = policy.ConfigDirs()

// maxProtectedWalk bounds the directories ExistingProtected reads.
const maxProtectedWalk = 200000

// ExistingProtected walks root (a writable host path: the workspace, a
// read_write path) and returns the entries g refuses writes to, at any
// depth: files, and whole directories when everything below them is
// protected (a git directory's hooks, .idea, .devcontainer, a home's
// .ssh). It never follows symlinks or crosses into another filesystem, and
// returns truncated=true when root has more directories than it reads.
func ExistingProtected(root string, g *policy.ConfigGuard) (out []Protected, truncated bool) {
	rootInfo, err := os.Lstat(root)
	if err != nil || !rootInfo.IsDir() {
		return nil, false
	}
	dev := devOf(rootInfo)
	queue := []string{root}
	for n := 0; len(queue) > 0; n++ {
		if n >= maxProtectedWalk {
			return out, true
		}
		dir := queue[0]
		queue = queue[1:]
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		d := hostDir(dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			isDir := e.IsDir()
			if e.Type()&os.ModeSymlink != 0 {
				if g.Check(policy.OpSymlink, d, e.Name()) != nil || g.Check(policy.OpWrite, d, e.Name()) != nil {
					out = append(out, Protected{Path: p})
				}
				continue
			}
			if isDir && g.Check(policy.OpCreate, hostDir(p), "x") != nil {
				out = append(out, Protected{Path: p, Dir: true}) // all of it
				continue
			}
			if isDir && slices.Contains(configDirs, e.Name()) {
				out = append(out, Protected{Path: p, Dir: true, Anchor: true})
			}
			if g.Check(policy.OpWrite, d, e.Name()) != nil {
				out = append(out, Protected{Path: p, Dir: isDir})
				if !isDir {
					continue
				}
			}
			if isDir {
				if fi, err := os.Lstat(p); err == nil && devOf(fi) == dev {
					queue = append(queue, p)
				}
			}
		}
	}
	return out, false
}

// hostDir is a policy.GuardDir over a host path (a plan, not a mediator:
// the sandbox is not running yet).
type hostDir string

func (h hostDir) Path() string { return string(h) }

func (h hostDir) Has(rel string) bool {
	_, err := os.Lstat(filepath.Join(string(h), rel))
	return err == nil
}

func (h hostDir) Parent() policy.GuardDir {
	if h == "/" {
		return nil
	}
	return hostDir(filepath.Dir(string(h)))
}

// Dir returns a policy.GuardDir over the host directory p, for a backend
// that decides writes itself on host paths it holds (wasm).
func Dir(p string) policy.GuardDir { return hostDir(filepath.Clean(p)) }
