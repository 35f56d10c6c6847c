// Package testutil holds the one place where tests decide to skip: a test
// that needs root, a kernel feature or a binary calls a Require helper, which
// skips with the reason on a developer machine and fails in CI (CI=true),
// where everything the tests need is installed and they must not skip.
package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// InCI reports whether the tests run in CI, where nothing may skip.
func InCI() bool { return os.Getenv("CI") != "" }

// Skip skips t with reason, or fails it in CI.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required in CI but unavailable: %s", reason)
	}
	t.Skip(reason)
}

// RequireRoot needs euid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root")
	}
}

// RequireLinux needs a Linux kernel.
func RequireLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		Skip(t, "needs Linux")
	}
}

// RequireBinary needs name on PATH and returns its path.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, name+" not installed")
	}
	return p
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// AirlockBinary returns the path of an airlock binary built from this tree:
// $AIRLOCK_BIN when set (the Makefile builds it once), otherwise one built
// once per test process.
func AirlockBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AIRLOCK_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-test-bin-")
		if err == nil {
			// MkdirTemp makes it 0700: a sandbox whose init runs as
			// another uid (a host id range, a policy uid) must exec it.
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "airlock")
		cmd := exec.Command("go", "build", "-o", buildPath, "github.com/airlock-dev/airlock/cmd/airlock")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("build airlock: %v", buildErr)
	}
	return buildPath
}

var (
	kubeOnce sync.Once
	kubeErr  error
)

// AirlockKubeBinary returns the path of the airlock-kube build (airlock with
// the Kubernetes backend, -tags kubernetes) beside AirlockBinary, where a
// plain airlock's `serve --backend kubernetes` finds it: $AIRLOCK_BIN's
// sibling when the Makefile built both, otherwise built once per test
// process next to the one AirlockBinary built.
func AirlockKubeBinary(t testing.TB) string {
	t.Helper()
	bin := AirlockBinary(t)
	kube := filepath.Join(filepath.Dir(bin), "airlock-kube")
	if os.Getenv("AIRLOCK_BIN") != "" {
		if _, err := os.Stat(kube); err != nil {
			t.Fatalf("AIRLOCK_BIN is set but %s is missing: make build-kube", kube)
		}
		return kube
	}
	kubeOnce.Do(func() {
		cmd := exec.Command("go", "build", "-tags", "kubernetes", "-o", kube, "github.com/airlock-dev/airlock/cmd/airlock")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			kubeErr = &buildError{out: string(out), err: err}
		}
	})
	if kubeErr != nil {
		t.Fatalf("build airlock-kube: %v", kubeErr)
	}
	return kube
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }
