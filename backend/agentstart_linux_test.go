package backend_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// A sandbox whose agent dies at once fails to start with one error kind,
// unavailable, on every agent-backed backend (they share agentbox), and
// leaves the caller nothing to clean: the start is not a timeout, not an
// invalid request and not a closed sandbox.
func TestAgentDeathAtStartIsUnavailableOnEveryBackend(t *testing.T) {
	testutil.RequireRoot(t)
	if os.Getenv("AIRLOCK_MICROVM_DIR") == "" {
		// The guest kernel `make guest-kernel` prepared in this repository.
		wd, _ := os.Getwd()
		t.Setenv("AIRLOCK_MICROVM_DIR", filepath.Join(wd, "..", "var", "microvm"))
	}
	// A static program that exits at once stands in for the agent (the
	// microVM's init must be static).
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stderr.WriteString(\"agent gone\\n\"); os.Exit(3) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	falseBin := filepath.Join(dir, "exits")
	build := exec.Command(testutil.RequireBinary(t, "go"), "build", "-o", falseBin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in: %v\n%s", err, out)
	}
	for _, name := range []string{"docker", "gvisor", "microvm"} {
		t.Run(name, func(t *testing.T) {
			b, err := backend.Open(name, backend.Options{AgentBinary: falseBin})
			if err != nil {
				t.Fatal(err)
			}
			if p := b.Probe(context.Background()); !p.Available {
				testutil.Skip(t, name+": "+p.Reason)
			}
			ws := backendtest.Workspace(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sb, err := b.Create(ctx, sandbox.Spec{ID: "sb-agentstart-" + name, Policy: backendtest.Policy(t, ws, nil)})
			if err == nil {
				sb.Destroy(context.Background())
				t.Fatal("a sandbox whose agent exits at once started")
			}
			if !errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrTimeout) || errors.Is(err, sandbox.ErrClosed) {
				t.Fatalf("create: %v; want unavailable (and neither a timeout nor closed)", err)
			}
			t.Logf("%s: %v", name, err)
		})
	}
}
