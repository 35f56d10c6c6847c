package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
