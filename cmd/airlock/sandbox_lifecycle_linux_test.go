package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// airlock sandbox pause|resume|checkpoint|rollback against a real serve:
// a rollback restores what an exec removed; bad arguments exit 125.
func TestSandboxCLILifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nlimits:\n  disk: 256Mi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		out, errOut, code := sbCLI(t, sock, "", args...)
		if code != want {
			t.Fatalf("%v: exit %d (want %d): %s", args, code, want, errOut)
		}
		return strings.TrimSpace(out)
	}
	id := run(0, "create", "--policy", pol, "--keep-alive")
	run(0, "exec", id, "--", "sh", "-c", "echo kept > /workspace/f")
	cp := run(0, "checkpoint", "--name", "first", id)
	if ls := run(0, "checkpoint", "ls", id); !strings.Contains(ls, cp) || !strings.Contains(ls, "first") {
		t.Fatalf("checkpoint ls: %s", ls)
	}
	run(0, "exec", id, "--", "rm", "/workspace/f")
	run(0, "rollback", id, cp)
	if got := run(0, "exec", id, "--", "cat", "/workspace/f"); got != "kept" {
		t.Fatalf("after rollback: %q", got)
	}
	run(0, "pause", id)
	if st := run(0, "ls", "--all"); !strings.Contains(st, "paused") {
		t.Fatalf("ls after pause: %s", st)
	}
	run(0, "resume", id)
	if got := run(0, "exec", id, "--", "cat", "/workspace/f"); got != "kept" {
		t.Fatalf("after resume: %q", got)
	}
	run(0, "pause", "--memory", id)
	if st := run(0, "ls"); !strings.Contains(st, "frozen") {
		t.Fatalf("ls after pause --memory: %s", st)
	}
	run(0, "resume", id)
	run(0, "checkpoint", "rm", id, cp)
	run(125, "rollback", id)
	run(125, "rollback", id, cp)
	run(125, "pause")
	run(0, "rm", id)
}
