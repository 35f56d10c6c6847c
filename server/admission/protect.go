package admission

import (
	"fmt"
	"os"
	"path"

	"github.com/airlock-dev/airlock/internal/writeback"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Protection asks a sandbox's write rules (policy.ConfigGuard, the one
// implementation the backends enforce) about a file operation before it
// reaches the sandbox. The backend refuses it anyway, with a bare
// permission error; checked here first, a refused operation is a 403 that
// names the rule and why it exists. A server sandbox's workspace is a host
// directory at the same path, so the decision is made on it.
type Protection struct {
	ws    string // the workspace on the host
	in    string // where the sandbox sees it
	guard *policy.ConfigGuard
}

// NewProtection is the Protection of resolved policy pol (nil when it
// protects nothing).
func NewProtection(pol *policy.Policy) *Protection {
	ws := pol.Filesystem.WorkspacePath()
	if ws == "" {
		return nil
	}
	home := pol.Process.Env["HOME"]
	if home == pol.Filesystem.WorkspaceInside() {
		home = ws // the guard judges host paths
	}
	return &Protection{ws: ws, in: pol.Filesystem.WorkspaceInside(), guard: pol.ConfigGuard(home)}
}

// host maps a path inside the sandbox's workspace to the host ("" when
// it is not in the workspace).
func (pr *Protection) host(p string) string {
	if p == pr.in {
		return pr.ws
	}
	if within(p, pr.in) {
		return pr.ws + p[len(pr.in):]
	}
	return ""
}

// check refuses op on p (a clean absolute path inside the sandbox) when
// the rules do; paths outside the workspace are the backend's to decide.
func (pr *Protection) check(what string, op policy.GuardOp, p string) error {
	if pr == nil || p == pr.in || !within(p, pr.in) {
		return nil
	}
	hp := pr.host(p)
	d := pr.guard.Check(op, writeback.HostDir(path.Dir(hp)), path.Base(hp))
	if d == nil {
		return nil
	}
	return fmt.Errorf("%s %q: refused by rule %s (%s): %w", what, p, d.Rule, policy.GuardRuleWhy(d.Rule), sandbox.ErrPermission)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}

// CheckWrite checks creating or writing a file at p ("mkdir": a directory).
func (pr *Protection) CheckWrite(what, p string) error {
	if pr == nil {
		return nil
	}
	op := policy.OpCreate
	switch {
	case what == "mkdir":
		op = policy.OpMkdir
	case pr.host(p) != "" && exists(pr.host(p)):
		op = policy.OpWrite
	}
	return pr.check(what, op, p)
}

// CheckMove checks removing p: the rules never refuse a removal.
func (pr *Protection) CheckMove(what, p string) error { return nil }

// CheckRename checks renaming from onto to: how the entry arrives under
// its new name (a directory or symlink may bring protected settings).
func (pr *Protection) CheckRename(from, to string) error {
	if pr == nil {
		return nil
	}
	op := policy.OpRenameFile
	if fi, err := os.Lstat(pr.host(from)); pr.host(from) != "" && err == nil {
		switch {
		case fi.IsDir():
			op = policy.OpRenameDir
		case fi.Mode()&os.ModeSymlink != 0:
			op = policy.OpSymlink
		}
	}
	if op != policy.OpRenameFile {
		if err := pr.check("rename away", policy.OpMoveAway, from); err != nil {
			return err
		}
	}
	return pr.check("rename onto", op, to)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
