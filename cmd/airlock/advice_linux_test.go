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

// The coding-agent profile keeps the tool caches between runs by default,
// in airlock's own store (never the host's cache directory); --no-cache
// keeps none.
func TestRunCodingAgentCachesByDefault(t *testing.T) {
	testutil.RequireRoot(t)
	home, cache, ws := t.TempDir(), t.TempDir(), t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"run", "--profile", "coding-agent"}, args...)...)
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "XDG_CACHE_HOME=" + cache}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o.String(), e.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}
	script := "ls $HOME/.cache/go-build $HOME/go/pkg/mod $HOME/.npm $HOME/.cache/pip $HOME/.cargo/registry 2>&1 | grep -c kept; for d in .cache/go-build go/pkg/mod .npm .cache/pip .cargo/registry; do touch $HOME/$d/kept; done"
	if out, e, code := run("--", "sh", "-c", script); code != 0 || out != "0\n" {
		t.Fatalf("first run: exit %d out %q err %q", code, out, e)
	}
	if out, e, code := run("--", "sh", "-c", script); code != 0 || out != "5\n" {
		t.Fatalf("second run: the caches did not persist: exit %d out %q err %q", code, out, e)
	}
	if _, err := os.Stat(filepath.Join(cache, "airlock", "caches", "go")); err != nil {
		t.Fatalf("caches not in airlock's store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "go-build", "kept")); err == nil {
		t.Fatal("a cache write reached the host's own cache directory")
	}
	if out, e, code := run("--no-cache", "--", "sh", "-c", "ls $HOME/.cache/go-build 2>/dev/null | grep -c kept"); out != "0\n" {
		t.Fatalf("--no-cache: exit %d out %q err %q", code, out, e)
	}
	if _, e, code := run("--no-cache", "--cache", "go", "--", "true"); code != exitAirlock || !strings.Contains(e, "exclusive") {
		t.Fatalf("--no-cache with --cache: exit %d err %q", code, e)
	}
}

// A path argument that exists on the host but not inside (the sandbox's
// /tmp is private) is named with how to expose it when the command fails;
// exposed with --ro, the same command works.
func TestRunHintsPathOutsideView(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	dir, err := os.MkdirTemp("/tmp", "airlock-outside-view-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "session.sh")
	if err := os.WriteFile(script, []byte("echo ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, e, code := runIn(t, ws, "", "run", "--", "sh", script)
	if code == 0 || !strings.Contains(e, script+" exists on the host but not inside the sandbox") || !strings.Contains(e, "--ro "+script) {
		t.Fatalf("exit %d stderr %q: want a failure naming the path and --ro", code, e)
	}
	// Through a session too.
	_, e, code = session(t, ws, "outside", "", "sh", script)
	if code == 0 || !strings.Contains(e, script+" exists on the host but not inside the sandbox") {
		t.Fatalf("session: exit %d stderr %q: want the same hint", code, e)
	}
	out, e, code := runIn(t, ws, "", "run", "--ro", script, "--", "sh", script)
	if code != 0 || out != "ran\n" {
		t.Fatalf("exposed with --ro: exit %d out %q err %q", code, out, e)
	}
}

// A refused outbound connection is named at exit (and live, stderr not
// being a terminal) with the reason and the flag that would allow it.
func TestRunEgressRefusalSummary(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "curl")
	ws := t.TempDir()
	out, e, code := runIn(t, ws, "", "run", "--allow", "example.com:443", "--", "curl", "-s", "-w", "%{http_code}", "http://refused.example/")
	if code != 0 || !strings.HasSuffix(out, "403") {
		t.Fatalf("exit %d out %q err %q: want the proxy's 403", code, out, e)
	}
	// The 403's body says the same.
	if !strings.Contains(out, "refused refused.example:80: host not in allow list; to allow: an allow entry refused.example:80 (airlock run --allow refused.example:80") {
		t.Errorf("403 body %q does not name the destination, reason and flag", out)
	}
	for _, want := range []string{
		"airlock: refused 1 outbound connection(s):",
		"refused.example:80: host not in allow list; to allow: --allow refused.example:80 (network.allow)",
	} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr %q lacks %q", e, want)
		}
	}
}
