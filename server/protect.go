package server

import (
	"fmt"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// protection is the server's check of a sandbox's protected workspace
// paths (policy.ProtectedConfig) before a file operation reaches the
// sandbox. The backend enforces them anyway, but its pinning (read-only
// binds, placeholders) answers with whatever errno it produces (EBUSY,
// ENOTDIR): checked here first, a refused operation is a 403 that names the
// rule and why it exists.
type protection struct {
	ws      string
	entries []policy.ProtectedEntry
	anchors []string
}

// newProtection is the protection of resolved policy pol (nil when it
// protects nothing).
func newProtection(pol *policy.Policy) *protection {
	if len(pol.ProtectedPaths()) == 0 {
		return nil
	}
	return &protection{ws: pol.Filesystem.WorkspacePath(), entries: policy.ProtectedConfig(), anchors: policy.ProtectedConfigAnchors()}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// checkWrite refuses creating, writing or making a directory at p (a
// clean absolute path inside the sandbox) when p is a protected path or
// below one.
func (pr *protection) checkWrite(op, p string) error {
	if pr == nil {
		return nil
	}
	for _, e := range pr.entries {
		if within(p, path.Join(pr.ws, e.Path)) {
			return fmt.Errorf("%s %q: protected path %s (%s): %w", op, p, e.Path, e.Why, sandbox.ErrPermission)
		}
	}
	return nil
}

// checkMove refuses removing or renaming p when that would remove or
// replace a protected path: p is one, below one, holds one, or is a
// directory the protection is anchored in (.git, .vscode, ...).
func (pr *protection) checkMove(op, p string) error {
	if pr == nil {
		return nil
	}
	if err := pr.checkWrite(op, p); err != nil {
		return err
	}
	for _, a := range pr.anchors {
		if within(path.Join(pr.ws, a), p) {
			return fmt.Errorf("%s %q: holds protected workspace configuration (%s): %w", op, p, a, sandbox.ErrPermission)
		}
	}
	return nil
}
