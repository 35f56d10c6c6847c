package agent

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
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

// TestFilesAsUser: with a configured identity, file operations through the
// API are checked and owned like the processes' own, not the agent's.
func TestFilesAsUser(t *testing.T) {
	testutil.RequireRoot(t)
	root, err := os.MkdirTemp("", "agent-files-as-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	os.Mkdir(filepath.Join(root, "open"), 0o777)
	os.Chmod(filepath.Join(root, "open"), 0o777)
	os.Mkdir(filepath.Join(root, "closed"), 0o755)
	os.WriteFile(filepath.Join(root, "secret"), []byte("root only"), 0o600)
	ctx := testCtx(t)

	// As the agent's own identity (root), everything is allowed.
	plain := startGuest(t, guestOptions{root: root})
	if err := plain.client.Files().WriteFile(ctx, "/closed/by-root", strings.NewReader("x"), 0o644, false); err != nil {
		t.Fatalf("root write: %v", err)
	}
	if b, err := readAll(t, plain.client.Files(), "/secret"); err != nil || string(b) != "root only" {
		t.Fatalf("root read: %q %v", b, err)
	}

	cfg := baseConfig()
	cfg.UID, cfg.GID = 65534, 65534
	g := startGuest(t, guestOptions{root: root, config: &cfg})
	f := g.client.Files()
	if err := f.WriteFile(ctx, "/open/mine", strings.NewReader("x"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir(ctx, "/open/dir", 0o700, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"open/mine", "open/dir"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, p), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s owned by %d:%d (%v), want 65534:65534", p, st.Uid, st.Gid, err)
		}
	}
	// The process user can work with what the API wrote.
	if r := mustRun(t, g.client, sh("echo more >> "+filepath.Join(root, "open/mine")+" && echo ok")); r.stdout != "ok\n" {
		t.Fatalf("process cannot write the API's file: %+v", r)
	}
	denied := map[string]error{
		"write in a root dir":  f.WriteFile(ctx, "/closed/f", strings.NewReader("x"), 0o644, false),
		"mkdir in a root dir":  f.Mkdir(ctx, "/closed/d", 0o755, false),
		"remove a root file":   f.Remove(ctx, "/closed/by-root", false),
		"rename out of a root": f.Rename(ctx, "/closed/by-root", "/open/stolen"),
	}
	_, rerr := readAll(t, f, "/secret")
	denied["read a root file"] = rerr
	for what, err := range denied {
		if !errors.Is(err, sandbox.ErrPermission) {
			t.Errorf("%s: %v, want ErrPermission", what, err)
		}
	}
	// The agent's threads got their identity back: the agent itself still
	// answers and a process still runs as configured.
	if r := mustRun(t, g.client, sh("id -u")); r.stdout != "65534\n" {
		t.Fatalf("id: %+v", r)
	}
}
