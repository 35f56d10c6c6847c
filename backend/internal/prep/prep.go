// Package prep is the first stage every container-style backend's Create
// shares: it checks a spec (ID, a resolved policy, an absolute workspace),
// works out the sandbox's credentials, finds the agent binary, and builds
// the component logger, the audit sink and the write guard (the caller's
// pinned files and the agent binary pinned). It touches nothing on the
// host and must never loosen what the policy says.
package prep

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Sandbox is what the checks decided about one spec.
type Sandbox struct {
	Spec     sandbox.Spec
	Policy   *policy.Policy
	UID, GID int    // the sandbox user (policy.Process.Credentials)
	AgentBin string // the agent binary, symlinks resolved
	Log      *slog.Logger
	Sink     audit.Sink
	Guard    *policy.ConfigGuard
	Start    time.Time
}

// Wrap prefixes an error of Create with the sandbox it is about.
func Wrap(id, format string, args ...any) error {
	return fmt.Errorf("create sandbox %q: "+format, append([]any{id}, args...)...)
}

// Check runs the shared checks on spec; log is the backend's logger (the
// spec's own wins), agentBinary the configured agent. Errors are wrapped
// with the sandbox's ID and wrap ErrInvalid or ErrUnavailable.
func Check(spec sandbox.Spec, agentBinary string, log *slog.Logger) (*Sandbox, error) {
	p := &Sandbox{Spec: spec, Policy: spec.Policy, Start: time.Now()}
	if !sandbox.ValidID(spec.ID) {
		return nil, Wrap(spec.ID, "invalid id: %w", sandbox.ErrInvalid)
	}
	if p.Policy == nil {
		return nil, Wrap(spec.ID, "nil policy: %w", sandbox.ErrInvalid)
	}
	if ws := p.Policy.Filesystem.WorkspacePath(); ws != "" && !filepath.IsAbs(ws) {
		return nil, Wrap(spec.ID, "workspace %q is not absolute (policy not resolved): %w", ws, sandbox.ErrInvalid)
	}
	var err error
	if p.UID, p.GID, err = p.Policy.Process.Credentials(os.Getuid(), os.Getgid()); err != nil {
		return nil, Wrap(spec.ID, "%w", err)
	}
	if p.AgentBin, err = filepath.EvalSymlinks(agentBinary); err != nil {
		return nil, Wrap(spec.ID, "agent binary %s: %v: %w", agentBinary, err, sandbox.ErrUnavailable)
	}
	p.Log = spec.Log
	if p.Log == nil {
		p.Log = log
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	p.Log = p.Log.With("sandbox", spec.ID)
	p.Sink = spec.Audit
	if p.Sink == nil {
		p.Sink = audit.Discard
	}
	p.Guard = p.Policy.ConfigGuard(p.Policy.Process.Env["HOME"])
	for k, v := range spec.Pinned {
		p.Guard.Pinned[k] = v
	}
	p.Guard.Pinned[p.AgentBin] = "the airlock binary"
	return p, nil
}
