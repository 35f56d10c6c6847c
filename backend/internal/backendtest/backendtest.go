// Package backendtest holds what every backend's own tests need to drive
// a sandbox: a resolved test policy, a workspace, a sandbox that goes
// when the test ends, a shell snippet run through the agent. The
// conformance suite (sandbox/sandboxtest) is the behaviour every backend
// must show; this is only the tests' plumbing, shared so that it is
// written once.
package backendtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Policy resolves the default profile with ws as workspace (no timeout)
// and applies edit, if any, before resolving.
func Policy(t testing.TB, ws string, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	p, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Filesystem.Workspace = ws
	p.Limits.Timeout = 0
	if edit != nil {
		edit(p)
	}
	r, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Direct turns protect_config off: the workspace is written in place
// (with it on, writes sit in an overlay until Sync).
func Direct(p *policy.Policy) {
	off := false
	p.Filesystem.ProtectConfig = &off
}

// Workspace is a new empty directory (0755) for a test's workspace.
func Workspace(t testing.TB) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// Create makes a sandbox within timeout and destroys it when t ends.
func Create(t testing.TB, b sandbox.Backend, spec sandbox.Spec, timeout time.Duration) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

// Sh runs a shell snippet in sb through the agent, within timeout, and
// returns its status and combined output (trimmed).
func Sh(t testing.TB, sb sandbox.Sandbox, script string, timeout time.Duration) (sandbox.ExitStatus, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %q: %v", script, err)
	}
	return st, strings.TrimSpace(out.String())
}
