package wasm

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// access is what an operation does to a path.
type access int

const (
	accessRead   access = iota
	accessWrite         // create, write, chmod, link to
	accessRemove        // unlink, rmdir, rename away
)

// mountRules are a mount's path rules, relative to its host directory:
// deny (no access at all), checked as given and, on Linux, again as the
// kernel resolved the path (symlinks, hard links), so an alias cannot reach
// it; and the write guard (policy.ConfigGuard: protected configuration at
// every depth, pinned files), decided on the directory the kernel
// resolved, under a lock held until the operation is done, so that two
// processes cannot race a check.
type mountRules struct {
	deny   []string
	guard  *policy.ConfigGuard // nil on the sandbox's private mounts
	real   string              // the host directory with symlinks resolved
	report func(policy.Denial)

	mu   sync.Mutex
	last policy.Denial // the last refusal (under mu)
}

func (r *mountRules) active(a access) bool {
	return len(r.deny) > 0 || (a != accessRead && r.guard != nil)
}

// lexical checks a cleaned relative path against the deny rules.
func (r *mountRules) lexical(clean string, a access) experimentalsys.Errno {
	if denied(r.deny, clean) {
		return experimentalsys.EACCES
	}
	return 0
}

// check checks rel (relative to root) against the deny rules, following
// what the kernel would resolve for its parent directory.
func (r *mountRules) check(root *os.Root, rel string, a access) experimentalsys.Errno {
	if len(r.deny) == 0 {
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

// guarded runs act once the guard allowed op on rel's entry, holding the
// lock across both. Without a guard it just runs act.
func (r *mountRules) guarded(root *os.Root, rel string, op policy.GuardOp, act func() error) error {
	if r.guard == nil {
		return act()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.decide(root, rel, op); e != 0 {
		return &deniedError{r.last}
	}
	return act()
}

// deniedError is a write the guard refused: EACCES to a WASI program,
// ErrPermission naming the rule to the files API.
type deniedError struct{ d policy.Denial }

func (e *deniedError) Error() string {
	return e.d.Op + " " + e.d.Path + ": refused by rule " + e.d.Rule + " (" + policy.GuardRuleWhy(e.d.Rule) + ")"
}

func (e *deniedError) Unwrap() []error {
	return []error{sandbox.ErrPermission, experimentalsys.EACCES}
}

// decide asks the guard about op on rel's entry, in the directory the
// kernel resolves rel's parent to (lexically where /proc cannot say).
func (r *mountRules) decide(root *os.Root, rel string, op policy.GuardOp) experimentalsys.Errno {
	clean := path.Clean(rel)
	if clean == "." || r.guard == nil {
		return 0
	}
	parentRel := path.Dir(clean)
	if dir, err := root.Open(parentRel); err == nil {
		if real, ok := r.realRel(dir); ok {
			parentRel = real
		}
		dir.Close()
	}
	base := r.real
	if base == "" {
		return experimentalsys.EACCES // cannot place the mount: fail closed
	}
	d := r.guard.Check(op, hostfs.Dir(filepath.Join(base, filepath.FromSlash(parentRel))), path.Base(clean))
	if d == nil {
		return 0
	}
	r.last = *d
	if r.report != nil {
		r.report(*d)
	}
	return experimentalsys.EACCES
}

// writeOp is the guard operation of writing rel: OpWrite on what exists,
// OpCreate on a new name.
func writeOp(root *os.Root, rel string) policy.GuardOp {
	if _, err := root.Lstat(rel); err == nil {
		return policy.OpWrite
	}
	return policy.OpCreate
}

// guardedRename runs act, the rename of fi from fromRel to toRel, when the
// guard allows the entry to arrive at toRel and, for a directory or a
// symlink, to leave fromRel (a config directory moved away could not be
// moved back: both directions are refused alike).
func (r *mountRules) guardedRename(root *os.Root, fromRel, toRel string, fi fs.FileInfo, act func() error) error {
	op := renameOp(fi)
	if op == policy.OpRenameDir || op == policy.OpSymlink {
		if err := r.guarded(root, fromRel, policy.OpMoveAway, func() error { return nil }); err != nil {
			return err
		}
	}
	return r.guarded(root, toRel, op, act)
}

// renameOp is how an entry arrives under a new name.
func renameOp(fi fs.FileInfo) policy.GuardOp {
	switch {
	case fi.IsDir():
		return policy.OpRenameDir
	case fi.Mode()&fs.ModeSymlink != 0:
		return policy.OpSymlink
	}
	return policy.OpRenameFile
}

// checkOpened checks the file the kernel actually opened for access a:
// the deny rules on its real path, and for a write the guard on it (a
// final symlink followed elsewhere).
func (r *mountRules) checkOpened(root *os.Root, f *os.File, a access) experimentalsys.Errno {
	if !r.active(a) {
		return 0
	}
	rel, ok := r.realRel(f)
	if !ok {
		return 0
	}
	if e := r.lexical(rel, a); e != 0 {
		return e
	}
	if a == accessWrite && r.guard != nil && rel != "." {
		d := r.guard.Check(policy.OpWrite, hostfs.Dir(filepath.Join(r.real, filepath.FromSlash(path.Dir(rel)))), path.Base(rel))
		if d != nil {
			if r.report != nil {
				r.report(*d)
			}
			return experimentalsys.EACCES
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
