package microvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func randID() string {
	var b [5]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// repoKernelDir is the guest kernel `make guest-kernel` prepared.
func repoKernelDir() string {
	if d := os.Getenv("AIRLOCK_MICROVM_DIR"); d != "" {
		return filepath.Join(d, "kernel")
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "var", "microvm", "kernel")
}

// testBackend returns a backend with its own state dir, shared-memory dir
// and cgroup parent (its Cleanup touches nothing of another test's); TCG
// unless AIRLOCK_MICROVM_ACCEL says otherwise. CI must have QEMU and the
// kernel (make deps): there a missing one fails.
func testBackend(t testing.TB, noTemplates bool) *Backend {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "qemu-system-x86_64")
	if _, err := os.Stat(filepath.Join(repoKernelDir(), "kernel.json")); err != nil {
		testutil.Skip(t, "no guest kernel in "+repoKernelDir()+" (make guest-kernel)")
	}
	dir, err := os.MkdirTemp("", "mvt-")
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{
		AgentBinary: testutil.AirlockBinary(t), StateDir: dir, CacheDir: sharedTemplates, KernelDir: repoKernelDir(),
		CgroupParent: "airlock-microvm-test-" + filepath.Base(dir), Accel: os.Getenv("AIRLOCK_MICROVM_ACCEL"),
		NoTemplates: noTemplates,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b.Cleanup(ctx, nil)
		os.RemoveAll(dir)
	})
	return b
}

// testPolicy resolves the default profile with ws as workspace; protect
// keeps protect_config on (writes reach the host through Sync).
func testPolicy(t testing.TB, ws string, protect bool) *policy.Policy {
	t.Helper()
	if protect {
		return backendtest.Policy(t, ws, nil)
	}
	return backendtest.Policy(t, ws, backendtest.Direct)
}

func workspace(t testing.TB) string { t.Helper(); return backendtest.Workspace(t) }

// create makes a sandbox and destroys it when t ends.
func create(t testing.TB, b *Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.ID == "" {
		spec.ID = "mv-" + randID()
	}
	return backendtest.Create(t, b, spec, 3*time.Minute)
}

// sh runs a shell snippet in sb through the agent and returns its status
// and combined output.
func sh(t testing.TB, sb sandbox.Sandbox, script string) (sandbox.ExitStatus, string) {
	t.Helper()
	return backendtest.Sh(t, sb, script, 2*time.Minute)
}

// leaks reports what sandbox id left on the host: a VMM process, its
// directory (sockets), its cgroup, a shared-memory file of its own.
func leaks(b *Backend, id string) error {
	var found []string
	if pids := b.vmmPids(id); len(pids) > 0 {
		found = append(found, fmt.Sprintf("vmm processes %v", pids))
	}
	if _, err := os.Stat(filepath.Join(b.vmsDir(), id)); err == nil {
		found = append(found, "vm directory")
	}
	for _, d := range newVMCgroup(b.cfg.CgroupParent + "/" + id).dirs() {
		if _, err := os.Stat(d); err == nil {
			found = append(found, "cgroup "+d)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(b.cfg.CacheDir, "*"+id+"*")); len(m) > 0 {
		found = append(found, "shared memory "+strings.Join(m, ","))
	}
	if len(found) > 0 {
		return fmt.Errorf("%s", strings.Join(found, "; "))
	}
	return nil
}

// specFor is a spec with the default policy on a fresh workspace, written
// in place (protect_config off).
func specFor(t testing.TB) sandbox.Spec {
	return sandbox.Spec{Policy: testPolicy(t, workspace(t), false)}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
