package wasm

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// access is what an operation does to a path.
type access int

const (
	accessRead   access = iota
	accessWrite         // create, write, chmod, link to
	accessRemove        // unlink, rmdir, rename away: also refused on ancestors of protected paths
)

// mountRules are a mount's path rules, relative to its host directory:
// deny (no access at all) and protect (the policy's protect_config paths:
// no writes, and no removing or renaming a directory that holds one, which
// would let a guest recreate it). Paths are checked as given and, on Linux,
// again as the kernel resolved them (symlinks, hard links), so an alias
// cannot reach them.
type mountRules struct {
	deny    []string
	protect []string
	real    string // the host directory with symlinks resolved
}

func (r *mountRules) active(a access) bool {
	return len(r.deny) > 0 || (a != accessRead && len(r.protect) > 0)
}

// lexical checks a cleaned relative path against the rules.
func (r *mountRules) lexical(clean string, a access) experimentalsys.Errno {
	if denied(r.deny, clean) {
		return experimentalsys.EACCES
	}
	if a == accessRead {
		return 0
	}
	for _, p := range r.protect {
		if clean == p || under(clean, p) || clean == "." && a == accessRemove {
			return experimentalsys.EPERM
		}
		if a == accessRemove && under(p, clean) {
			return experimentalsys.EPERM
		}
	}
	return 0
}

// check checks rel (relative to root) for access a, following what the
// kernel would resolve for its parent directory.
func (r *mountRules) check(root *os.Root, rel string, a access) experimentalsys.Errno {
	if !r.active(a) {
		return 0
	}
	clean := path.Clean(rel)
	if e := r.lexical(clean, a); e != 0 {
		return e
	}
	if clean == "." {
		return 0
	}
	dir, err := root.Open(path.Dir(clean))
	if err != nil {
		return 0 // the operation itself will fail the same way
	}
	realDir, ok := r.realRel(dir)
	dir.Close()
	if !ok {
		return 0
	}
	if realClean := path.Join(realDir, path.Base(clean)); realClean != clean {
		return r.lexical(realClean, a)
	}
	return 0
}

// checkOpened checks the file the kernel actually opened (after following
// a final symlink, or through a hard link) for access a.
func (r *mountRules) checkOpened(root *os.Root, f *os.File, a access) experimentalsys.Errno {
	if !r.active(a) {
		return 0
	}
	if rel, ok := r.realRel(f); ok {
		if e := r.lexical(rel, a); e != 0 {
			return e
		}
	}
	if a == accessRead || len(r.protect) == 0 {
		return 0
	}
	fi, err := f.Stat()
	if err != nil {
		return errno(err)
	}
	st := sys.NewStat_t(fi)
	if st.Nlink <= 1 || fi.IsDir() {
		return 0
	}
	// A hard link to a protected file: compare identities.
	for _, p := range r.protect {
		pfi, err := root.Lstat(p)
		if err != nil {
			continue
		}
		if os.SameFile(fi, pfi) {
			return experimentalsys.EPERM
		}
		if pfi.IsDir() {
			var entries []os.DirEntry
			if d, err := root.Open(p); err == nil {
				entries, _ = d.ReadDir(-1)
				d.Close()
			}
			for _, e := range entries {
				if efi, err := e.Info(); err == nil && os.SameFile(fi, efi) {
					return experimentalsys.EPERM
				}
			}
		}
	}
	return 0
}

// realRel is f's path relative to the mount as the kernel sees it.
func (r *mountRules) realRel(f *os.File) (string, bool) {
	p, ok := fdPath(f)
	if !ok || r.real == "" {
		return "", false
	}
	rel, err := filepath.Rel(r.real, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// relRules converts absolute host paths to paths relative to host, keeping
// those inside it.
func relRules(host string, abs []string) []string {
	var out []string
	for _, d := range abs {
		rel, err := filepath.Rel(host, filepath.Clean(d))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// quota bounds the bytes written into a private directory (the policy's
// disk limit for /tmp and tmpfs paths). It counts growth of files and
// credits removed files; it is an upper bound of the real use.
type quota struct {
	limit int64
	used  atomic.Int64
}

func (q *quota) take(n int64) bool {
	if q == nil || n <= 0 {
		return true
	}
	if q.used.Add(n) > q.limit {
		q.used.Add(-n)
		return false
	}
	return true
}

func (q *quota) give(n int64) {
	if q != nil && n > 0 {
		q.used.Add(-n)
	}
}

// fdBudget bounds the files one process holds open (the policy's
// open_files limit).
type fdBudget struct {
	limit int64
	n     atomic.Int64
}

func (b *fdBudget) acquire() bool {
	if b == nil || b.limit <= 0 {
		return true
	}
	if b.n.Add(1) > b.limit {
		b.n.Add(-1)
		return false
	}
	return true
}

func (b *fdBudget) release() {
	if b != nil && b.limit > 0 {
		b.n.Add(-1)
	}
}

// WASI errnos through wazero have no ENOSPC or EMFILE: the disk and
// open-file limits surface as EIO (the operation fails, nothing retries).
const (
	errNoSpace      = experimentalsys.EIO
	errTooManyFiles = experimentalsys.EIO
)
