package sandboxtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func (s *suite) runExecChecks(t *testing.T) {
	bx := s.shared(t)
	s.check(t, "exec/stdout-stderr", func(t *testing.T) { s.execStdoutStderr(t, bx) })
	s.check(t, "exec/exit-codes", func(t *testing.T) { s.execExitCodes(t, bx) })
	s.check(t, "exec/signal-exit", func(t *testing.T) { s.execSignalExit(t, bx) })
	s.check(t, "exec/signal-deliver", func(t *testing.T) { s.execSignalDeliver(t, bx) })
	s.check(t, "exec/kill-group", func(t *testing.T) { s.testKillGroup(t, bx) })
	s.check(t, "exec/stdin", func(t *testing.T) { s.execStdin(t, bx) })
	s.check(t, "exec/stdin-stream", func(t *testing.T) { s.execStdinStream(t, bx) })
	s.check(t, "exec/env-dir", func(t *testing.T) { s.execEnvDir(t, bx) })
	s.check(t, "exec/pty", func(t *testing.T) { s.testPTY(t, bx, false) })
	s.check(t, "exec/pty-resize", func(t *testing.T) { s.testPTY(t, bx, true) })
	s.check(t, "exec/resize-no-tty", func(t *testing.T) { s.execResizeNoTty(t, bx) })
	s.check(t, "exec/timeout", func(t *testing.T) { s.execTimeout(t, bx) })
	s.check(t, "exec/large-output", func(t *testing.T) { s.execLargeOutput(t, bx) })
	s.check(t, "exec/binary-data", func(t *testing.T) { s.execBinaryData(t, bx) })
	s.check(t, "exec/path-lookup", func(t *testing.T) { s.execPathLookup(t, bx) })
	s.check(t, "exec/not-found", func(t *testing.T) { s.execNotFound(t, bx) })
}

func (s *suite) execStdoutStderr(t *testing.T, bx *box) {
	r := bx.run(t, nil, "echo-split", "to-stdout\n", "to-stderr\n")
	if r.stdout != "to-stdout\n" || r.stderr != "to-stderr\n" {
		t.Fatalf("stdout %q stderr %q, want them separated", r.stdout, r.stderr)
	}
	if r.status.Code != 0 || r.status.Signal != 0 {
		t.Fatalf("status %+v, want 0", r.status)
	}
}

func (s *suite) execExitCodes(t *testing.T, bx *box) {
	for _, code := range []int{0, 1, 42} {
		if r := bx.run(t, nil, "exit", fmt.Sprint(code)); r.status.Code != code || r.status.Signal != 0 {
			t.Errorf("exit %d: status %+v", code, r.status)
		}
	}
}

func (s *suite) execSignalExit(t *testing.T, bx *box) {
	for _, sig := range []int{9, 15} {
		r := bx.run(t, nil, "killself", fmt.Sprint(sig))
		if r.status.Code != 128+sig || r.status.Signal != sig {
			t.Errorf("killed by signal %d: status %+v, want code %d signal %d (stderr %q)", sig, r.status, 128+sig, sig, r.stderr)
		}
	}
}

func (s *suite) execSignalDeliver(t *testing.T, bx *box) {
	ctx := ctxT(t)
	out := newSyncBuffer()
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("sleep", "120"), Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(ctx, sandbox.SIGTERM); err != nil {
		mustSupported(t, "exec/signal-deliver", err)
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 128+sandbox.SIGTERM || st.Signal != sandbox.SIGTERM {
		t.Fatalf("after SIGTERM: status %+v, want 143/15", st)
	}
}

func (s *suite) execStdin(t *testing.T, bx *box) {
	r := bx.run(t, strings.NewReader("hello stdin\n"), "cat")
	if r.stdout != "hello stdin\n" || r.status.Code != 0 {
		t.Fatalf("cat: %+v", r)
	}
	if r := bx.run(t, nil, "cat"); r.stdout != "" || r.status.Code != 0 {
		t.Fatalf("cat with nil stdin must see EOF at once: %+v", r)
	}
}

func (s *suite) execStdinStream(t *testing.T, bx *box) {
	ctx := ctxT(t)
	pr, pw := io.Pipe()
	out := newSyncBuffer()
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("cat"), Stdin: pr, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	go pw.Write([]byte("first\n"))
	if !out.waitFor(ctx, "first\n") {
		t.Fatalf("streamed stdin not echoed before EOF (got %q)", out.String())
	}
	go func() { pw.Write([]byte("second\n")); pw.Close() }()
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 || out.String() != "first\nsecond\n" {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
}

func (s *suite) execEnvDir(t *testing.T, bx *box) {
	var out bytes.Buffer
	st := bx.exec(t, sandbox.ExecRequest{Args: bx.argv("env", "SBT_VAR"), Env: map[string]string{"SBT_VAR": "v-42"}, Stdout: &out})
	if st.Code != 0 || out.String() != "v-42" {
		t.Errorf("env: %+v %q", st, out.String())
	}
	out.Reset()
	st = bx.exec(t, sandbox.ExecRequest{Args: bx.argv("pwd"), Dir: bx.ws, Stdout: &out})
	if st.Code != 0 || filepath.Clean(out.String()) != filepath.Clean(bx.ws) {
		t.Errorf("pwd with Dir %q: %+v %q", bx.ws, st, out.String())
	}
}

func (s *suite) execResizeNoTty(t *testing.T, bx *box) {
	ctx := ctxT(t)
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("exit", "0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(ctx, 10, 10); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Resize without a TTY: %v, want ErrInvalid", err)
	}
	p.Wait(ctx)
}

func (s *suite) execTimeout(t *testing.T, bx *box) {
	ctx := ctxT(t)
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("sleep", "600"), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("per-exec timeout did not end the process")
	}
	if !st.TimedOut && !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("status %+v err %v, want TimedOut", st, err)
	}
	if err == nil && st.Code == 0 {
		t.Fatalf("timed out process reports exit 0: %+v", st)
	}
}

func (s *suite) execLargeOutput(t *testing.T, bx *box) {
	const mib = 50
	c := &patternChecker{badAt: -1}
	var errb bytes.Buffer
	st := bx.exec(t, sandbox.ExecRequest{Args: bx.argv("pattern", fmt.Sprint(mib)), Stdout: c, Stderr: &errb})
	if st.Code != 0 || st.Truncated {
		t.Fatalf("status %+v stderr %q", st, errb.String())
	}
	if c.n != mib<<20 {
		t.Fatalf("got %d bytes, want %d", c.n, mib<<20)
	}
	if c.badAt >= 0 {
		t.Fatalf("byte %d is %d, want %d", c.badAt, c.badByte, c.badAt%251)
	}
}

func (s *suite) execBinaryData(t *testing.T, bx *box) {
	r := bx.run(t, nil, "bytes", "64")
	want := make([]byte, 0, 64*256)
	for i := 0; i < 64; i++ {
		for b := 0; b < 256; b++ {
			want = append(want, byte(b))
		}
	}
	if r.status.Code != 0 || r.stdout != string(want) {
		t.Fatalf("all byte values on stdout: status %+v, %d bytes, equal=%v", r.status, len(r.stdout), r.stdout == string(want))
	}
	in := make([]byte, 1<<20)
	rand.Read(in)
	r = bx.run(t, bytes.NewReader(in), "cat")
	if r.status.Code != 0 || r.stdout != string(in) {
		t.Fatalf("binary stdin round trip: status %+v, %d of %d bytes, equal=%v", r.status, len(r.stdout), len(in), r.stdout == string(in))
	}
}

func (s *suite) execPathLookup(t *testing.T, bx *box) {
	if len(s.opts.Shell) == 0 {
		t.Logf("not applicable: the backend declared no shell (Options.Shell)")
		return
	}
	var out bytes.Buffer
	st := bx.exec(t, sandbox.ExecRequest{Args: append(append([]string{}, s.opts.Shell...), "echo $((6*7)); exit 7"), Stdout: &out})
	if st.Code != 7 || strings.TrimSpace(out.String()) != "42" {
		t.Fatalf("%v through PATH: status %+v output %q", s.opts.Shell, st, out.String())
	}
}

func (s *suite) execNotFound(t *testing.T, bx *box) {
	ctx := ctxT(t)
	for _, argv0 := range []string{filepath.Join(bx.ws, "no-such-program"), "/no/such/dir/program"} {
		p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: []string{argv0}})
		if err == nil {
			st, _ := p.Wait(ctx)
			t.Errorf("exec %s: started (status %+v), want an error wrapping ErrCommandNotFound", argv0, st)
			continue
		}
		if !errors.Is(err, sandbox.ErrCommandNotFound) {
			t.Errorf("exec %s: %v, want ErrCommandNotFound (the CLI's 127)", argv0, err)
		}
	}
	// A directory exists but cannot be executed: the CLI's 126.
	if p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: []string{bx.ws}}); err == nil {
		st, _ := p.Wait(ctx)
		t.Errorf("exec %s (a directory): started (status %+v), want ErrCannotExecute", bx.ws, st)
	} else if !errors.Is(err, sandbox.ErrCannotExecute) {
		t.Errorf("exec %s (a directory): %v, want ErrCannotExecute", bx.ws, err)
	}
	if _, err := bx.Exec(ctx, sandbox.ExecRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("exec with empty Args: %v, want ErrInvalid", err)
	}
}

// testPTY runs the helper on a terminal: it must see one of the requested
// size, and with resize the new size after SIGWINCH.
func (s *suite) testPTY(t *testing.T, bx *box, resize bool) {
	ctx := ctxT(t)
	out := newSyncBuffer()
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("tty"), TTY: true, Rows: 24, Cols: 80, Stdout: out})
	if err != nil {
		mustSupported(t, "exec/pty", err)
		t.Fatal(err)
	}
	if !out.waitFor(ctx, "tty 24 80") {
		t.Fatalf("no terminal of 24x80 inside: %q", out.String())
	}
	if resize {
		if err := p.Resize(ctx, 30, 100); err != nil {
			t.Fatalf("Resize: %v", err)
		}
		if !out.waitFor(ctx, "winch 30 100") {
			t.Fatalf("resize not seen inside: %q", out.String())
		}
		st, err := p.Wait(ctx)
		if err != nil || st.Code != 0 {
			t.Fatalf("status %+v err %v", st, err)
		}
		return
	}
	if err := p.Signal(ctx, sandbox.SIGKILL); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	p.Wait(ctx)
}

// testKillGroup: Kill ends the process and what it started in its group
// (a client that gives up on `sh -c "sleep 100; echo"` must not leave the
// sleep behind). Backends without processes (wasm) just end the one.
func (s *suite) testKillGroup(t *testing.T, bx *box) {
	ctx := ctxT(t)
	out := newSyncBuffer()
	argv := bx.argv("spawn-child", "600")
	if s.opts.HelperGOOS == "wasip1" {
		argv = bx.argv("sleep", "600")
	}
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: argv, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	child := ""
	if s.opts.HelperGOOS != "wasip1" {
		if !out.waitFor(ctx, "\n") {
			t.Fatalf("no child pid: %q", out.String())
		}
		child = strings.TrimSpace(out.String())
	}
	if err := p.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Signal != sandbox.SIGKILL {
		t.Fatalf("after Kill: status %+v, err %v; want SIGKILL", st, err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Errorf("Kill after exit: %v, want nil (idempotent)", err)
	}
	if child == "" {
		return
	}
	for bx.run(t, nil, "alive", child).status.Code == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the child %s of a killed process lives on", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
