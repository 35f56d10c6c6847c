package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// openPTY opens a pseudo-terminal pair for a CLI under test.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testutil.Skip(t, "no /dev/ptmx: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// exec -it gives the command a terminal of the caller's size and passes
// keystrokes through.
func TestSandboxCLIExecTTY(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	id, errOut, code := sbCLI(t, sock, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	m, s := openPTY(t)
	defer m.Close()
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 111}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testutil.AirlockBinary(t), "sandbox", "exec", "-it", id, "--", "sh", "-c", "stty size; read x; echo got $x; exit 4")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOST=unix://"+sock)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	var mu sync.Mutex
	go func() {
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
	deadline := time.Now().Add(30 * time.Second)
	for !seen("33 111") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no terminal size in %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.Write([]byte("hello\r"))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("exit: %v; output %q", err, out.String())
	}
	for !seen("got hello") {
		if time.Now().After(deadline) {
			t.Fatalf("no echo of the input in %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exec -t with stdin from a pipe: end of input reaches the command, and
// SIGTERM or SIGINT end the CLI (and the command) instead of being ignored.
func TestSandboxCLIExecTTYPipedStdin(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	id, errOut, code := sbCLI(t, sock, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	// A hang guard, not a timing: before the fix cat never saw EOF.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.AirlockBinary(t), "sandbox", "exec", "-t", id, "--", "cat")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOST=unix://"+sock)
	cmd.Stdin = strings.NewReader("piped line\n")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "piped line") {
		t.Fatalf("exec -t cat with piped stdin: %v (ctx %v), output %q", err, ctx.Err(), out)
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, tty := range []bool{true, false} {
			args := []string{"sandbox", "exec", id, "--", "sh", "-c", "sleep 1234; echo"}
			if tty {
				args = []string{"sandbox", "exec", "-t", id, "--", "sh", "-c", "sleep 1234; echo"}
			}
			cmd := exec.CommandContext(ctx, testutil.AirlockBinary(t), args...)
			cmd.Env = append(os.Environ(), "AIRLOCK_HOST=unix://"+sock)
			pr, pw, _ := os.Pipe() // stdin that never ends
			cmd.Stdin = pr
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			for !sleeping(t, sock, id, "sleep 1234") {
				if ctx.Err() != nil {
					t.Fatal("the command did not start")
				}
				time.Sleep(20 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			pw.Close()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("tty=%v: after %v: %v (ctx %v), want exit %d; stderr %q", tty, sig, err, ctx.Err(), 128+int(sig), errb.String())
			}
			for sleeping(t, sock, id, "sleep 1234") {
				if ctx.Err() != nil {
					t.Fatalf("tty=%v: the command outlived the CLI's %v", tty, sig)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// sleeping reports whether a process whose command line contains marker
// runs in sandbox id.
func sleeping(t *testing.T, sock, id, marker string) bool {
	t.Helper()
	out, errOut, code := sbCLI(t, sock, "", "exec", id, "--", "sh", "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done`)
	if code != 0 {
		t.Fatalf("listing processes: %d %s", code, errOut)
	}
	return strings.Contains(out, marker)
}

// A command killed by its timeout or the memory limit says so (exit 137
// alone does not tell why).
func TestSandboxCLIExecSaysWhyKilled(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nlimits:\n  memory: 64Mi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, errOut, code := sbCLI(t, sock, "", "create", "--policy", pol)
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	_, errOut, code = sbCLI(t, sock, "", "exec", "--timeout", "1s", id, "--", "sleep", "30")
	if code != 137 || !strings.Contains(errOut, "timeout") {
		t.Errorf("timeout: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = sbCLI(t, sock, "", "exec", id, "--", "python3", "-c", "b = bytearray(512 << 20); print(len(b))")
	if code != 137 || !strings.Contains(errOut, "memory limit") {
		t.Errorf("out of memory: exit %d, stderr %q", code, errOut)
	}
}
