package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestExecStdoutStderrExit(t *testing.T) {
	g := startGuest(t, guestOptions{})
	tests := []struct {
		script         string
		stdout, stderr string
		code, signal   int
	}{
		{"echo out; echo err >&2; exit 3", "out\n", "err\n", 3, 0},
		{"printf abc", "abc", "", 0, 0},
		{"exit 255", "", "", 255, 0},
		{"echo before; kill -TERM $$", "before\n", "", 128 + 15, 15},
		{"kill -KILL $$", "", "", 128 + 9, 9},
	}
	for _, tt := range tests {
		r := mustRun(t, g.client, sh(tt.script))
		if r.stdout != tt.stdout || r.stderr != tt.stderr || r.status.Code != tt.code || r.status.Signal != tt.signal {
			t.Errorf("%q: got stdout %q stderr %q status %+v", tt.script, r.stdout, r.stderr, r.status)
		}
	}
}

func TestExecEnvDirAndPathLookup(t *testing.T) {
	dir := t.TempDir()
	g := startGuest(t, guestOptions{})
	r := mustRun(t, g.client, sandbox.ExecRequest{
		Args: []string{"sh", "-c", `echo "$FOO|$LANG|$(pwd)"`},
		Env:  map[string]string{"FOO": "bar", "LANG": "override"},
		Dir:  dir,
	})
	if want := "bar|override|" + dir + "\n"; r.stdout != want {
		t.Fatalf("got %q, want %q", r.stdout, want)
	}
	// The base environment is the config's, not the agent's.
	r = mustRun(t, g.client, sh(`echo "${GOPATH-unset}"`))
	if r.stdout != "unset\n" {
		t.Fatalf("agent environment leaked: %q", r.stdout)
	}
}

func TestExecStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	tests := []struct {
		req  sandbox.ExecRequest
		kind error
	}{
		{sandbox.ExecRequest{Args: []string{"no-such-command-xyz"}}, sandbox.ErrNotFound},
		{sandbox.ExecRequest{Args: []string{"/no/such/binary"}}, sandbox.ErrNotFound},
		{sandbox.ExecRequest{Args: []string{noexec}}, sandbox.ErrPermission},
		{sandbox.ExecRequest{Args: []string{dir}}, sandbox.ErrPermission},
		{sandbox.ExecRequest{Args: []string{"/bin/true"}, Dir: "/no/such/dir"}, sandbox.ErrNotFound},
		{sandbox.ExecRequest{Args: []string{"/bin/true"}, Dir: "relative"}, sandbox.ErrInvalid},
		{sandbox.ExecRequest{}, sandbox.ErrInvalid},
		{sandbox.ExecRequest{Args: []string{"/bin/echo", "a\x00b"}}, sandbox.ErrInvalid},
		{sandbox.ExecRequest{Args: []string{"/bin/true"}, Env: map[string]string{"A=B": "c"}}, sandbox.ErrInvalid},
		{sandbox.ExecRequest{Args: []string{"/bin/echo", strings.Repeat("x", MaxArgvEnvBytes)}}, sandbox.ErrInvalid},
	}
	for _, tt := range tests {
		_, err := g.client.Exec(ctx, tt.req)
		if !errors.Is(err, tt.kind) {
			t.Errorf("%q: got %v, want %v", tt.req.Args, err, tt.kind)
		}
	}
	// The session is still fine afterwards.
	if err := g.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestExecSignal(t *testing.T) {
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	var out syncBuffer
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{
		Args:   []string{"/bin/sh", "-c", "trap 'echo got-usr1; exit 7' USR1; echo ready; while :; do sleep 0.05; done"},
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(out.String(), "ready") })
	if err := p.Signal(ctx, 10); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 7 || !strings.Contains(out.String(), "got-usr1") {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
	if err := p.Signal(ctx, sandbox.SIGTERM); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("signal after exit: %v", err)
	}
	if err := p.Signal(ctx, 0); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("signal 0: %v", err)
	}

	p, err = g.client.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() <= 0 {
		t.Fatalf("pid %d", p.PID())
	}
	if err := p.Signal(ctx, sandbox.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, err = p.Wait(ctx)
	if err != nil || st.Code != 143 || st.Signal != 15 {
		t.Fatalf("status %+v err %v", st, err)
	}
	if err := p.Resize(ctx, 10, 10); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("resize without tty: %v", err)
	}
}

func TestExecStdinStreaming(t *testing.T) {
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	// Interactive: each line written is answered before the next one.
	pr, pw := io.Pipe()
	var out syncBuffer
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{
		Args:   []string{"/bin/sh", "-c", `while read l; do echo "got $l"; done; echo eof`},
		Stdin:  pr,
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(pw, "line%d\n", i)
		want := fmt.Sprintf("got line%d\n", i)
		waitFor(t, func() bool { return strings.Contains(out.String(), want) })
	}
	// CloseStdin ends the input although the pipe stays open.
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 || !strings.HasSuffix(out.String(), "eof\n") {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
	pw.Close()

	// No stdin: the process reads EOF at once.
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"cat"}})
	if r.stdout != "" || r.status.Code != 0 {
		t.Fatalf("cat without stdin: %+v", r)
	}
	// A process that never reads its input still exits and is reported.
	r = mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"true"}, Stdin: bytes.NewReader(make([]byte, 4<<20))})
	if r.status.Code != 0 {
		t.Fatalf("true with unread stdin: %+v", r)
	}
}

func TestExecBinaryAndLargeOutput(t *testing.T) {
	g := startGuest(t, guestOptions{})
	// Every byte value, through cat, unchanged.
	bin := make([]byte, 1<<20)
	rand.Read(bin)
	for i := 0; i < 256; i++ {
		bin[i] = byte(i)
	}
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"cat"}, Stdin: bytes.NewReader(bin)})
	if r.stdout != string(bin) {
		t.Fatalf("binary data changed: %d bytes back", len(r.stdout))
	}

	// 50 MB in and out through cat while stderr also flows: no deadlock,
	// nothing lost.
	const size = 50 << 20
	src := io.LimitReader(rand.Reader, size)
	h := sha256.New()
	tee := io.TeeReader(src, h)
	out := sha256.New()
	var n countWriter
	r = mustRun(t, g.client, sandbox.ExecRequest{
		Args:   []string{"/bin/sh", "-c", "cat; i=0; while [ $i -lt 1000 ]; do echo err$i >&2; i=$((i+1)); done"},
		Stdin:  tee,
		Stdout: io.MultiWriter(out, &n),
	})
	if n.n != size || !bytes.Equal(h.Sum(nil), out.Sum(nil)) || r.status.Code != 0 {
		t.Fatalf("got %d bytes, status %+v", n.n, r.status)
	}
	if !strings.HasSuffix(r.stderr, "err999\n") {
		t.Fatalf("stderr lost: %d bytes", len(r.stderr))
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func TestExecTimeout(t *testing.T) {
	g := startGuest(t, guestOptions{})
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", "echo start; exec sleep 60"}, Timeout: 200 * time.Millisecond})
	if !r.status.TimedOut || r.status.Signal != 9 || r.status.Code != 137 || r.stdout != "start\n" {
		t.Fatalf("got %+v", r)
	}
	// A process that ends in time is not marked.
	r = mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"true"}, Timeout: time.Minute})
	if r.status.TimedOut || r.status.Code != 0 {
		t.Fatalf("got %+v", r)
	}
	// The config's default timeout applies when the request has none.
	cfg := baseConfig()
	cfg.Timeout = 200 * time.Millisecond
	g2 := startGuest(t, guestOptions{config: &cfg})
	r = mustRun(t, g2.client, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if !r.status.TimedOut {
		t.Fatalf("default timeout not applied: %+v", r)
	}
}

func TestExecOutputLimit(t *testing.T) {
	g := startGuest(t, guestOptions{client: ClientOptions{OutputLimit: 1000}})
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"yes"}})
	if len(r.stdout) != 1000 || !r.status.Truncated || r.status.Signal != 9 {
		t.Fatalf("got %d bytes, status %+v", len(r.stdout), r.status)
	}
	// stdout and stderr share the limit.
	r = mustRun(t, g.client, sh("head -c 600 /dev/zero; head -c 600 /dev/zero >&2; sleep 60"))
	if len(r.stdout)+len(r.stderr) != 1000 || !r.status.Truncated {
		t.Fatalf("got %d+%d bytes, status %+v", len(r.stdout), len(r.stderr), r.status)
	}
	// Exactly at the limit in one write, then more later.
	r = mustRun(t, g.client, sh("head -c 1000 /dev/zero; sleep 0.1; echo more; sleep 60"))
	if len(r.stdout) != 1000 || !r.status.Truncated || r.status.Signal != 9 {
		t.Fatalf("got %d bytes, status %+v", len(r.stdout), r.status)
	}
	// Under the limit nothing happens.
	r = mustRun(t, g.client, sh("head -c 1000 /dev/zero"))
	if len(r.stdout) != 1000 || r.status.Truncated || r.status.Code != 0 {
		t.Fatalf("got %d bytes, status %+v", len(r.stdout), r.status)
	}
}

func TestExecDaemonHoldingPipes(t *testing.T) {
	// A background grandchild keeps stdout open: Wait still returns once
	// the main process exited, with the main process's output.
	g := startGuest(t, guestOptions{})
	r := mustRun(t, g.client, sh("echo main; (sleep 30; echo late) & exit 4"))
	if r.status.Code != 4 || r.stdout != "main\n" {
		t.Fatalf("got %+v", r)
	}
}

func TestExecConcurrent(t *testing.T) {
	g := startGuest(t, guestOptions{})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(t, g.client, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", fmt.Sprintf("echo %d; echo e%d >&2; exit %d", i, i, i%7)}})
			if r.err != nil || r.stdout != fmt.Sprintf("%d\n", i) || r.stderr != fmt.Sprintf("e%d\n", i) || r.status.Code != i%7 {
				errs <- fmt.Errorf("exec %d: %+v", i, r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestExecTTY(t *testing.T) {
	t.Run("ptypeer", func(t *testing.T) { testExecTTY(t, nil) })
	// The /dev/pts/N path for kernels without TIOCGPTPEER.
	t.Run("ptspath", func(t *testing.T) { testExecTTY(t, []string{"AGENT_TEST_NO_PTYPEER=1"}) })
}

func testExecTTY(t *testing.T, env []string) {
	g := startGuest(t, guestOptions{extraEnv: env})
	ctx := testCtx(t)
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo tty; stty size"}, TTY: true, Rows: 30, Cols: 90})
	if !strings.Contains(r.stdout, "tty\r\n") || !strings.Contains(r.stdout, "30 90") {
		t.Fatalf("got %q", r.stdout)
	}
	// Without TTY the same test fails.
	r = mustRun(t, g.client, sh("test -t 0 || test -t 1 || echo notty"))
	if r.stdout != "notty\n" {
		t.Fatalf("got %q", r.stdout)
	}

	// Resize is seen by the process; input goes through the terminal.
	pr, pw := io.Pipe()
	defer pw.Close()
	var out syncBuffer
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{
		Args:   []string{"/bin/sh", "-c", "echo ready; read x; stty size; echo \"[$x]\""},
		TTY:    true,
		Rows:   24,
		Cols:   80,
		Stdin:  pr,
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(out.String(), "ready") })
	if err := p.Resize(ctx, 40, 100); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(pw, "typed\n")
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 {
		t.Fatalf("status %+v err %v", st, err)
	}
	if !strings.Contains(out.String(), "40 100") || !strings.Contains(out.String(), "[typed]") {
		t.Fatalf("got %q", out.String())
	}
	// A resize is signalled (SIGWINCH) to the foreground process.
	var wout syncBuffer
	p, err = g.client.Exec(ctx, sandbox.ExecRequest{
		Args:   []string{"/bin/sh", "-c", "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done"},
		TTY:    true,
		Stdout: &wout,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(wout.String(), "ready") })
	if err := p.Resize(ctx, 33, 77); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.Code != 0 || !strings.Contains(wout.String(), "33 77") {
		t.Fatalf("status %+v err %v out %q", st, err, wout.String())
	}
	// The process leads its own session with the pty as controlling terminal.
	r = mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", statScript}, TTY: true})
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[0] != f[1] || f[2] == "0" {
		t.Fatalf("pid, session, tty: %q", r.stdout)
	}
}

// statScript prints the shell's pid, session id and controlling terminal
// (tty_nr, 0 for none) from /proc/self/stat (fields 1, 6, 7; the shell's
// name has no spaces).
const statScript = `set -- $(cat /proc/$$/stat); echo $1 $6 $7`

func TestExecNoLeakedDescriptors(t *testing.T) {
	// The agent's channel (a socket), its own files and whatever it
	// inherited without close-on-exec must not reach processes it starts.
	leak, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	// Unconfined, an inherited descriptor reaches a child.
	plain := exec.Command("ls", "-l", "/proc/self/fd")
	plain.ExtraFiles = []*os.File{leak}
	out, err := plain.Output()
	if err != nil || !strings.Contains(string(out), " 3 -> "+os.Args[0]) {
		t.Fatalf("inherited descriptor not visible unconfined: %v %q", err, out)
	}
	g := startGuest(t, guestOptions{inherit: []*os.File{leak}})
	r := mustRun(t, g.client, sandbox.ExecRequest{Args: []string{"ls", "-l", "/proc/self/fd"}})
	fds := 0
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		fds++
		n, target := f[len(f)-3], f[len(f)-1]
		if n != "0" && n != "1" && n != "2" && !strings.HasPrefix(target, "/proc/") {
			t.Errorf("leaked descriptor: %s", line)
		}
		if strings.HasPrefix(target, "socket:") {
			t.Errorf("channel leaked: %s", line)
		}
	}
	if fds < 3 {
		t.Fatalf("unexpected listing %q", r.stdout)
	}
	// Each process has its own session (no TIOCSTI into a shared terminal).
	r = mustRun(t, g.client, sh(statScript))
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[0] != f[1] || f[2] != "0" {
		t.Fatalf("pid, session, tty: %q", r.stdout)
	}
}

func TestExecWaitContext(t *testing.T) {
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
	p.Signal(ctx, sandbox.SIGKILL)
	if st, err := p.Wait(ctx); err != nil || st.Signal != 9 {
		t.Fatalf("status %+v err %v", st, err)
	}
}
