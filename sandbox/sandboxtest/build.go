package sandboxtest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// buildHelper compiles ./helper for goos once per test process.
func buildHelper(t *testing.T, goos string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[goos]; ok {
		return p
	}
	goarch := runtime.GOARCH
	if goos == "wasip1" {
		goarch = "wasm"
	}
	dir, err := os.MkdirTemp("", "sandboxtest-helper-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "helper")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("build sandboxtest helper: no go command on PATH: %v", err)
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", out, "github.com/airlock-dev/airlock/sandbox/sandboxtest/helper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sandboxtest helper for %s: %v\n%s", goos, err, b)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	buildCache[goos] = out
	return out
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
