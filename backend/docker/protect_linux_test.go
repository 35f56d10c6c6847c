package docker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestProtectedConfigWriteBack: with protect_config (the default), the
// workspace is an overlay: nothing the sandbox writes reaches the host
// while it runs; Sync brings back an ordinary file and refuses a git hook,
// a git config change, an .envrc and a set-uid bit (refused already inside
// by seccomp), each refusal an audit event; a host file changed meanwhile
// is kept as the host has it.
func TestProtectedConfigWriteBack(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	for rel, c := range map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n", "host.txt": "host\n", "both.txt": "v1\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, rel), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(ws, ".git/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".git/refs"), 0o755)
	rec := &eventLog{}
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, ws, nil), Audit: rec})
	st, out := sh(t, sb, "cd "+ws+" && echo new > notes.txt && mkdir -p deep/er && echo x > deep/er/f && "+
		"mkdir -p .git/hooks && printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && "+
		"echo '[core] fsmonitor = evil' >> .git/config && echo 'echo pwned' > .envrc && echo sandbox > both.txt && "+
		"touch tool && (chmod u+s tool 2>/dev/null && echo CHMOD-OK || echo chmod-refused)")
	if st.Code != 0 {
		t.Fatalf("writes inside: %+v %s", st, out)
	}
	if out != "chmod-refused" {
		t.Fatalf("set-uid chmod inside: %q", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.txt")); err == nil {
		t.Fatal("a write reached the host before Sync: the workspace is not an overlay")
	}
	// The host changes a file the sandbox changed too (after it started).
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(ws, "both.txt"), []byte("host v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := sb.(sandbox.Syncer).Sync(ctx)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	t.Logf("sync: %+v", rep)
	for rel, want := range map[string]string{"notes.txt": "new\n", "deep/er/f": "x\n", ".git/config": "[core]\n", "both.txt": "host v2\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("%s after sync: %q %v, want %q", rel, b, err, want)
		}
	}
	for _, rel := range []string{".git/hooks/pre-commit", ".envrc"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
			t.Errorf("%s reached the host", rel)
		}
	}
	if fi, err := os.Stat(filepath.Join(ws, "tool")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("tool: %v %v", fi, err)
	}
	if rep.Denied < 3 || rec.count(audit.TypeDenied) < 3 || len(rep.Conflicts) != 1 {
		t.Errorf("report %+v, %d denied events: want >= 3 refusals and 1 conflict", rep, rec.count(audit.TypeDenied))
	}
}
