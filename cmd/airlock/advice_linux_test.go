package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The hidden-home advice is printed once per workspace (or with
// --verbose), not on every run, and again when a command fails because
// it lives in a dropped PATH entry.
func TestRunHomeAdviceOncePerWorkspace(t *testing.T) {
	testutil.RequireRoot(t)
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	run := func(ws string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"run"}, args...)...)
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin", "XDG_CACHE_HOME=" + cache}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return errb.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return errb.String(), 0
	}
	const advice = "dropped from PATH: "
	ws1, ws2 := t.TempDir(), t.TempDir()
	if e, _ := run(ws1, "--", "true"); !strings.Contains(e, advice+bin) {
		t.Fatalf("first run in a workspace: no advice: %q", e)
	}
	if e, _ := run(ws1, "--", "true"); strings.Contains(e, advice) {
		t.Fatalf("second run repeats the advice: %q", e)
	}
	if e, _ := run(ws1, "--verbose", "--", "true"); !strings.Contains(e, advice) {
		t.Fatalf("--verbose: no advice: %q", e)
	}
	if e, _ := run(ws2, "--", "true"); !strings.Contains(e, advice) {
		t.Fatalf("another workspace: no advice: %q", e)
	}
	e, code := run(ws1, "--", "mytool")
	if code != exitNotFound || !strings.Contains(e, "mytool is in "+bin) || !strings.Contains(e, "--ro "+bin) {
		t.Fatalf("a command in a dropped PATH entry: exit %d stderr %q, want 127 saying where it is and --ro", code, e)
	}
}
