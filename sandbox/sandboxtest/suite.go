// Package sandboxtest is the conformance suite every sandbox.Backend runs
// with one call, Run: lifecycle, exec, files, limits, leaks and concurrency,
// each a subtest. The processes it starts inside a sandbox are one helper
// program (./helper) built for the backend's target, so wasm and Linux
// backends run the same checks. Checks a backend cannot support by its
// nature are declared in Options.NotApplicable and reported as "not
// applicable" (logged, never skipped); anything else that does not work
// fails. It must never weaken a check for one backend and never touch the
// host beyond temp dirs it removes.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Options is what a backend tells the suite about itself.
type Options struct {
	// Spec returns a fresh base spec for one sandbox: a resolved policy
	// with a workspace the checks may write to. The suite sets ID (unique
	// per sandbox) and adjusts limits for the limit checks. Required.
	Spec func(t *testing.T) sandbox.Spec
	// HelperGOOS is the target the helper program is built for: "linux"
	// (default) or "wasip1" (GOARCH wasm).
	HelperGOOS string
	// HelperDir is the directory inside the sandbox where the helper is
	// placed. Empty: the policy's workspace (copied there on the host when
	// the workspace is a host directory, else written through Files).
	HelperDir string
	// Shell is how to run a shell command line found through PATH, e.g.
	// {"sh", "-c"} (the default for HelperGOOS linux). Nil for wasip1: the
	// exec/path-lookup check then reports not applicable.
	Shell []string
	// NotApplicable maps a check name (see Checks) to why this backend
	// cannot support it by its nature. Such checks are reported, not run.
	NotApplicable map[string]string
	// LeakCheck reports what a sandbox left on the host (processes,
	// mounts, cgroups, temp dirs) after it was destroyed or its Create
	// failed; nil error means nothing. Required unless "destroy/no-leaks"
	// is not applicable.
	LeakCheck func(t *testing.T, id string) error
	// Parallel is the number of concurrent execs and sandboxes in the
	// concurrency checks (default 8 and 4).
	Parallel int
}

// Checks lists every check name Run knows, for NotApplicable.
var Checks = []string{
	"lifecycle/basic", "lifecycle/invalid-spec", "lifecycle/cleanup",
	"exec/stdout-stderr", "exec/exit-codes", "exec/signal-exit", "exec/signal-deliver",
	"exec/stdin", "exec/stdin-stream", "exec/env-dir", "exec/pty", "exec/pty-resize", "exec/timeout",
	"exec/large-output", "exec/binary-data", "exec/not-found", "exec/resize-no-tty", "exec/path-lookup",
	"files/round-trip", "files/mode", "files/not-found", "files/invalid-path",
	"files/traversal", "files/symlink-out", "files/ops", "files/workspace-mount",
	"limits/memory", "limits/pids", "limits/output",
	"destroy/no-leaks", "concurrent/execs", "concurrent/sandboxes", "net/dial-port",
}

// opTimeout bounds each backend call so a hang fails instead of blocking the
// whole run; it is a safety net, never an assertion.
const opTimeout = 2 * time.Minute

// suite is one Run.
type suite struct {
	b    sandbox.Backend
	opts Options
	bin  string // helper binary on the host
}

// Run runs the whole conformance suite against b as subtests of t. The
// lifecycle/cleanup check calls b.Cleanup, which removes everything of b's
// that is not kept: give the suite a Backend with its own state directory
// and cgroup parent, never one shared with other running sandboxes.
func Run(t *testing.T, b sandbox.Backend, opts Options) {
	t.Helper()
	if opts.Spec == nil {
		t.Fatal("sandboxtest: Options.Spec is required")
	}
	if opts.HelperGOOS == "" {
		opts.HelperGOOS = "linux"
	}
	if opts.Shell == nil && opts.HelperGOOS == "linux" {
		opts.Shell = []string{"sh", "-c"}
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	for name := range opts.NotApplicable {
		if !known(name) {
			t.Fatalf("sandboxtest: NotApplicable names unknown check %q", name)
		}
	}
	s := &suite{b: b, opts: opts, bin: buildHelper(t, opts.HelperGOOS)}
	t.Run("lifecycle", func(t *testing.T) {
		s.check(t, "lifecycle/basic", s.testLifecycle)
		s.check(t, "lifecycle/invalid-spec", s.testInvalidSpec)
		s.check(t, "lifecycle/cleanup", s.testCleanup)
	})
	t.Run("exec", s.runExecChecks)
	t.Run("files", s.runFilesChecks)
	t.Run("net", func(t *testing.T) {
		s.check(t, "net/dial-port", s.testDialPort)
	})
	t.Run("limits", func(t *testing.T) {
		s.check(t, "limits/memory", s.testMemoryLimit)
		s.check(t, "limits/pids", s.testPidsLimit)
		s.check(t, "limits/output", s.testOutputLimit)
	})
	t.Run("destroy", func(t *testing.T) {
		s.check(t, "destroy/no-leaks", s.testNoLeaks)
	})
	t.Run("concurrent", func(t *testing.T) {
		s.check(t, "concurrent/execs", s.testConcurrentExecs)
		s.check(t, "concurrent/sandboxes", s.testConcurrentSandboxes)
	})
}

// check runs one named check as a subtest of its group, or reports it as
// not applicable.
func (s *suite) check(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	_, sub, _ := strings.Cut(name, "/")
	t.Run(sub, func(t *testing.T) {
		if reason, ok := s.opts.NotApplicable[name]; ok {
			t.Logf("not applicable: %s", reason)
			return
		}
		fn(t)
	})
}

func known(name string) bool {
	for _, c := range Checks {
		if c == name {
			return true
		}
	}
	return false
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// spec returns a base spec with a fresh ID.
func (s *suite) spec(t *testing.T) sandbox.Spec {
	t.Helper()
	sp := s.opts.Spec(t)
	if sp.Policy == nil {
		t.Fatal("sandboxtest: Options.Spec returned a spec without a policy")
	}
	p := *sp.Policy // shallow copy: the suite only changes scalar limits
	sp.Policy = &p
	sp.ID = "sbt-" + randHex(5)
	return sp
}

// workspace returns the sandbox path where the checks put files.
func (s *suite) workspace(sp sandbox.Spec) string {
	if s.opts.HelperDir != "" {
		return s.opts.HelperDir
	}
	return sp.Policy.Filesystem.WorkspaceInside()
}

// box is a created sandbox with the helper in place.
type box struct {
	sandbox.Sandbox
	spec   sandbox.Spec
	helper string // helper path inside
	ws     string // writable dir inside
}

// create makes a sandbox from sp, places the helper and destroys the
// sandbox when t ends.
func (s *suite) create(t *testing.T, sp sandbox.Spec) *box {
	t.Helper()
	ctx := ctxT(t)
	sb, err := s.b.Create(ctx, sp)
	if err != nil {
		t.Fatalf("create sandbox %q: %v", sp.ID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Errorf("destroy %q: %v", sp.ID, err)
		}
	})
	bx := &box{Sandbox: sb, spec: sp, ws: s.workspace(sp)}
	if bx.ws == "" {
		t.Fatal("sandboxtest: the spec has no workspace and Options.HelperDir is empty")
	}
	name := "sbt-helper-" + sp.ID
	if s.opts.HelperGOOS == "wasip1" {
		name += ".wasm"
	}
	bx.helper = filepath.Join(bx.ws, name)
	if err := s.placeHelper(ctx, bx); err != nil {
		t.Fatalf("place helper in %q: %v", sp.ID, err)
	}
	return bx
}

func (s *suite) placeHelper(ctx context.Context, bx *box) error {
	if host := s.hostPath(bx, bx.helper); host != "" {
		if err := os.Link(s.bin, host); err == nil {
			return nil
		}
		return copyFile(s.bin, host)
	}
	f, err := os.Open(s.bin)
	if err != nil {
		return err
	}
	defer f.Close()
	return bx.Files().WriteFile(ctx, bx.helper, f, 0o755, true)
}

// shared returns (creating once per parent test) the sandbox most exec and
// files checks share.
func (s *suite) shared(t *testing.T) *box {
	t.Helper()
	sp := s.spec(t)
	if l := sp.Policy.Limits.OutputBytes; l != 0 && l < 128<<20 {
		sp.Policy.Limits.OutputBytes = 128 << 20
	}
	return s.create(t, sp)
}

var errNotSupported = sandbox.ErrNotSupported

// mustSupported fails with a hint when a backend returns ErrNotSupported for
// a check it did not declare not applicable.
func mustSupported(t *testing.T, check string, err error) {
	t.Helper()
	if errors.Is(err, errNotSupported) {
		t.Fatalf("%s: %v (declare it in Options.NotApplicable if the backend cannot support it by nature)", check, err)
	}
}
