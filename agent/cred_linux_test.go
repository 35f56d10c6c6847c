package agent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

func TestCredentials(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := baseConfig()
	cfg.UID, cfg.GID = 65534, 65534
	g := startGuest(t, guestOptions{config: &cfg})
	r := mustRun(t, g.client, sh("id -u; id -g; id -G"))
	if r.stdout != "65534\n65534\n65534\n" {
		t.Fatalf("credentials: %q (stderr %q)", r.stdout, r.stderr)
	}
}

// copyForNobody copies the test binary where an unprivileged user can run it.
func copyForNobody(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, "agent.test")
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	return p
}

// TestNotDumpable attacks the agent from a process with its own uid: it
// must not read the agent's /proc files (nor ptrace it), while a plain
// process of the same uid is open to it.
func TestNotDumpable(t *testing.T) {
	testutil.RequireRoot(t)
	g := startGuest(t, guestOptions{
		binary: copyForNobody(t),
		sys:    &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}},
	})
	// Unconfined: a same-uid process's environment is readable.
	r := mustRun(t, g.client, sh(`sleep 30 & p=$!; cat /proc/$p/environ >/dev/null && echo readable; kill $p`))
	if r.stdout != "readable\n" {
		t.Fatalf("the attack does not work on a plain process: %+v", r)
	}
	r = mustRun(t, g.client, sh(`id -u; cat /proc/$PPID/environ >/dev/null || echo denied`))
	if r.stdout != "65534\ndenied\n" {
		t.Fatalf("agent's /proc readable by its own uid: %+v", r)
	}
	if !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
