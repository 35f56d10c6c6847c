package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// gitWork is what an agent does to a repository: add -A, commit, a
// branch, stash and pop, checkout, rebase; then it tries to move the
// nested repository's .git away (refused: it could not be moved back).
const gitWork = `set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
base=$(git symbolic-ref --short HEAD)
echo one > f1; git add -A; git commit -qm one
git checkout -qb topic; echo t > t1; git add -A; git commit -qm topic
git checkout -q "$base"; echo m > m1; git add -A; git commit -qm main
echo dirty >> f1; git stash -q; test "$(cat f1)" = one; git stash pop -q; grep -q dirty f1; git checkout -q -- f1
git checkout -q topic; git rebase -q "$base"
git log --format=%s | head -3 | tr '\n' ' '; echo
git status --porcelain | wc -l
if mv vendor/sub/.git vendor/sub/.git2 2>/dev/null; then echo moved; else echo kept; fi
git -C vendor/sub log --format=%s
`

// TestRunGitWorkflowInWorkspace (issue 25 item 8): real git in a real
// repository under `airlock run` and under a session: every step works,
// the host sees the result, and the nested repository's .git cannot be
// renamed away (its way back would be refused), so it stays usable.
func TestRunGitWorkflowInWorkspace(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "git")
	for _, mode := range []string{"run", "session"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			gitRepo(t, ws)
			gitRepo(t, filepath.Join(ws, "vendor", "sub"))
			cfg, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
			var out, errs string
			var code int
			if mode == "run" {
				out, errs, code = runIn(t, ws, "", "run", "--", "sh", "-c", gitWork)
			} else {
				out, errs, code = session(t, ws, "git", "", "sh", "-c", gitWork)
			}
			if code != 0 || out != "topic main one \n0\nkept\ninit\n" {
				t.Fatalf("exit %d\nstdout %q\nstderr %s", code, out, errs)
			}
			if !strings.Contains(errs, "config-dir-away") {
				t.Errorf("the refused rename is not explained: %q", errs)
			}
			host := exec.Command("git", "log", "--format=%s", "topic")
			host.Dir = ws
			if b, err := host.Output(); err != nil || string(b) != "topic\nmain\none\ninit\n" {
				t.Errorf("the host's view of the rebased branch: %v %q", err, b)
			}
			fsck := exec.Command("git", "fsck", "--strict")
			fsck.Dir = ws
			if b, err := fsck.CombinedOutput(); err != nil {
				t.Errorf("git fsck on the host: %v %s", err, b)
			}
			if now, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); !bytes.Equal(now, cfg) {
				t.Errorf(".git/config changed: %q", now)
			}
		})
	}
}

// TestRunPTYPassesNUL (issue 25 item 8): on a real terminal, `airlock run`
// (and a session's command) starts clean — no byte before the command's
// own — and NUL bytes pass both ways unmangled.
func TestRunPTYPassesNUL(t *testing.T) {
	testutil.RequireRoot(t)
	const script = `printf 'a\000b\000c\n'; dd bs=1 count=4 2>/dev/null | od -An -tx1`
	for _, mode := range []string{"run", "session"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			// The once-per-workspace advice goes to stderr, the terminal
			// too: a first run prints it, so the checked run is the second.
			runIn(t, ws, "", "run", "--", "true")
			args := []string{"run", "--", "sh", "-c", script}
			if mode == "session" {
				t.Cleanup(func() { runIn(t, ws, "", "run", "--session", "pty", "--end") })
				args = []string{"run", "--session", "pty", "--", "sh", "-c", script}
			}
			out, code := onTerminal(t, ws, "x\x00y\r", args...)
			if code != 0 || !strings.HasPrefix(out, "a\x00b\x00c\r\n") || !strings.Contains(out, "78 00 79 0a") {
				t.Fatalf("exit %d, terminal %q", code, out)
			}
		})
	}
}

// onTerminal runs airlock with a new terminal as its stdio, types input
// once the command has printed its first line, and returns what the
// terminal showed and the exit code.
func onTerminal(t *testing.T, dir, input string, args ...string) (string, int) {
	t.Helper()
	m, s := openPTY(t)
	defer m.Close()
	cmd := exec.Command(testutil.AirlockBinary(t), args...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	seen := func(s string) bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(out.String(), s) }
	deadline := time.Now().Add(60 * time.Second)
	for !seen("c\r\n") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the command's first line never came: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.Write([]byte(input))
	err := cmd.Wait()
	<-done // EIO once the last holder of the terminal is gone
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String(), code
}

// TestSessionImageRefused: a session with an image, by flag or by policy,
// is refused before anything starts or is pulled, with exit 125 and a
// message that names what to use instead.
func TestSessionImageRefused(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	pol := filepath.Join(ws, "image.yaml")
	os.WriteFile(pol, []byte("version: 1\nfilesystem:\n  image: 127.0.0.1:1/nothing:1\n"), 0o644)
	for _, args := range [][]string{
		{"run", "--session", "img", "--image", "127.0.0.1:1/nothing:1", "--", "true"},
		{"run", "--session", "img", "--policy", pol, "--", "true"},
	} {
		_, errs, code := runIn(t, ws, "", args...)
		if code != 125 || !strings.Contains(errs, "--session with an image") || !strings.Contains(errs, "airlock sandbox create --image") || strings.Contains(errs, "pull") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
}
