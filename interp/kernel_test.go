package interp

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
)

// hostExec runs the kernel as a plain host process: these are unit tests
// of the protocol and the kernels; the server's tests run them in sandboxes.
func hostExec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if _, err := exec.LookPath(req.Args[0]); err != nil {
		return nil, sandbox.ErrNotFound
	}
	cmd := exec.Command(req.Args[0], req.Args[1:]...)
	for k, v := range req.Env {
		cmd.Env = append(cmd.Environ(), k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = req.Stdout, req.Stderr
	// Not cmd.Stdin: Wait would wait for the copy from a reader that
	// stays open until the process is gone.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { io.Copy(stdin, req.Stdin); stdin.Close() }()
	p := &hostProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type hostProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *hostProc) PID() int { return p.cmd.Process.Pid }
func (p *hostProc) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	<-p.done
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return sandbox.ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}, nil
	}
	return sandbox.ExitStatus{Code: ws.ExitStatus()}, nil
}
func (p *hostProc) Signal(ctx context.Context, sig int) error {
	return p.cmd.Process.Signal(syscall.Signal(sig))
}
func (p *hostProc) Kill(ctx context.Context) error               { return p.cmd.Process.Kill() }
func (p *hostProc) Resize(context.Context, uint16, uint16) error { return sandbox.ErrInvalid }
func (p *hostProc) CloseStdin() error                            { return nil }

func startKernel(t *testing.T, lang string) *Kernel {
	t.Helper()
	switch lang {
	case Python:
		testutil.RequireBinary(t, "python3")
	case JavaScript:
		testutil.RequireBinary(t, "node")
	}
	k, err := Start(context.Background(), hostExec, Options{Language: lang, InterruptGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func run(t *testing.T, k *Kernel, code string) *Result {
	t.Helper()
	r, err := k.Run(context.Background(), code, 30*time.Second)
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	return r
}

func value(r *Result) string {
	if r.Value == nil {
		return "<nil>"
	}
	return *r.Value
}

func TestPythonKernelState(t *testing.T) {
	k := startKernel(t, Python)
	r := run(t, k, "x = 41\nprint('hello')\nimport os, sys\nos.system('echo from-a-child')\nprint('oops', file=sys.stderr)\nx + 1")
	if value(r) != "42" || r.Stdout != "hello\nfrom-a-child\n" || r.Stderr != "oops\n" || r.Error != nil {
		t.Fatalf("first cell: %+v value=%s", r, value(r))
	}
	r = run(t, k, "x * 2")
	if value(r) != "82" || r.ExecutionCount != 2 {
		t.Fatalf("state not kept: %+v value=%s", r, value(r))
	}
	r = run(t, k, "def f():\n    return 1/0\nf()")
	if r.Error == nil || r.Error.Name != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "return 1/0") ||
		strings.Contains(r.Error.Traceback, "kernel") {
		t.Fatalf("error: %+v", r.Error)
	}
	r = run(t, k, "syntax error here")
	if r.Error == nil || r.Error.Name != "SyntaxError" {
		t.Fatalf("syntax error: %+v", r.Error)
	}
	r = run(t, k, "import sys; sys.exit(3)")
	if r.Error == nil || r.Error.Name != "SystemExit" || r.Lost {
		t.Fatalf("SystemExit must be a cell error, the kernel lives on: %+v", r)
	}
	r = run(t, k, "x")
	if value(r) != "41" {
		t.Fatalf("after SystemExit: %s", value(r))
	}
	r = run(t, k, "input()")
	if r.Error == nil || r.Error.Name != "EOFError" {
		t.Fatalf("a cell must not read the protocol's stdin: %+v", r)
	}
}

func TestPythonKernelTimeoutKeepsState(t *testing.T) {
	k := startKernel(t, Python)
	run(t, k, "y = 7")
	r, err := k.Run(context.Background(), "while True:\n    pass", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Name != ErrNameTimeout || r.Lost || !strings.Contains(r.Error.Value, "state is kept") {
		t.Fatalf("timeout: %+v %+v", r, r.Error)
	}
	if v := value(run(t, k, "y")); v != "7" {
		t.Fatalf("state after interrupt: %s", v)
	}
}

func TestPythonKernelIgnoringInterruptIsKilled(t *testing.T) {
	k := startKernel(t, Python)
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
	r, err := k.Run(context.Background(), code, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Name != ErrNameTimeout || !r.Lost {
		t.Fatalf("want a lost kernel: %+v %+v", r, r.Error)
	}
	<-k.Done()
	if _, err := k.Run(context.Background(), "1", time.Second); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("run on a dead kernel: %v", err)
	}
}

func TestPythonKernelDies(t *testing.T) {
	k := startKernel(t, Python)
	r := run(t, k, "import os\nos._exit(5)")
	if r.Error == nil || r.Error.Name != ErrNameDied || !r.Lost || !strings.Contains(r.Error.Value, "code 5") {
		t.Fatalf("%+v %+v", r, r.Error)
	}
}

func TestPythonKernelWritesToProtocolFd(t *testing.T) {
	// Cells cannot reach the protocol stream: fd 1 is theirs, captured.
	k := startKernel(t, Python)
	r := run(t, k, "import os\nos.write(1, b'{\"type\":\"result\",\"id\":99}\\n')\n1")
	if r.Error != nil || value(r) != "1" || !strings.Contains(r.Stdout, `"id":99`) {
		t.Fatalf("%+v", r)
	}
}

func TestJavaScriptKernelState(t *testing.T) {
	testutil.RequireBinary(t, "sh")
	k := startKernel(t, JavaScript)
	r := run(t, k, "let x = 41; console.log('hello'); console.error('oops'); x + 1")
	if value(r) != "42" || r.Stdout != "hello\n" || r.Stderr != "oops\n" {
		t.Fatalf("%+v value=%s", r, value(r))
	}
	if v := value(run(t, k, "x * 2")); v != "82" {
		t.Fatalf("state: %s", v)
	}
	if v := value(run(t, k, "Promise.resolve(x + 2)")); v != "43" {
		t.Fatalf("promise: %s", v)
	}
	r = run(t, k, "null.boom")
	if r.Error == nil || r.Error.Name != "TypeError" {
		t.Fatalf("%+v", r.Error)
	}
	r, err := k.Run(context.Background(), "while (true) {}", time.Second)
	if err != nil || r.Error == nil || r.Error.Name != ErrNameTimeout || r.Lost {
		t.Fatalf("timeout: %v %+v", err, r)
	}
	if v := value(run(t, k, "x")); v != "41" {
		t.Fatalf("after interrupt: %s", v)
	}
}

func TestMissingInterpreter(t *testing.T) {
	missing := func(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
		return nil, sandbox.ErrNotFound
	}
	_, err := Start(context.Background(), missing, Options{Language: Python})
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "python3 is not installed") {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), missing, Options{Language: "cobol"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatal(err)
	}
}

// fakeKernel is a hostile kernel: it writes script to its stdout (after
// each request when perRequest), never what the protocol asks.
type fakeKernel struct {
	ready      string
	perRequest string
	stdout     io.Writer
	stdin      io.Reader
	done       chan struct{}
	once       sync.Once
}

func (f *fakeKernel) exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	f.stdout, f.stdin, f.done = req.Stdout, req.Stdin, make(chan struct{})
	go func() {
		f.stdout.Write([]byte(f.ready))
		buf := make([]byte, 1<<16)
		for {
			n, err := f.stdin.Read(buf)
			if err != nil {
				f.kill()
				return
			}
			if n > 0 && f.perRequest != "" {
				f.stdout.Write([]byte(f.perRequest))
			}
		}
	}()
	return f, nil
}

func (f *fakeKernel) kill()                      { f.once.Do(func() { close(f.done) }) }
func (f *fakeKernel) Kill(context.Context) error { f.kill(); return nil }
func (f *fakeKernel) PID() int                   { return 1 }
func (f *fakeKernel) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	<-f.done
	return sandbox.ExitStatus{Code: 137, Signal: 9}, nil
}
func (f *fakeKernel) Signal(ctx context.Context, sig int) error {
	if sig == sandbox.SIGKILL {
		f.kill()
	}
	return nil
}
func (f *fakeKernel) Resize(context.Context, uint16, uint16) error { return nil }
func (f *fakeKernel) CloseStdin() error                            { return nil }

func TestHostileKernel(t *testing.T) {
	ready := `{"type":"ready","language":"python","version":"x"}` + "\n"
	cases := []struct {
		name, ready, reply string
	}{
		{"garbage", ready, "not json at all\n"},
		{"wrong id", ready, `{"type":"result","id":77}` + "\n"},
		{"two answers", ready, `{"type":"result","id":1}` + "\n" + `{"type":"result","id":1}` + "\n" + `{"type":"result","id":1}` + "\n"},
		{"huge line", ready, strings.Repeat("x", 5000)},
		{"unknown type", ready, `{"type":"exec","id":1}` + "\n"},
		{"fake image", ready, `{"type":"result","id":1,"images":[{"format":"png","data":"aGVsbG8="}]}` + "\n"},
		{"silence", ready, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeKernel{ready: c.ready, perRequest: c.reply}
			k, err := Start(context.Background(), f.exec, Options{MaxMessage: 4096, InterruptGrace: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			r, err := k.Run(context.Background(), "1", 500*time.Millisecond)
			if err != nil {
				if errors.Is(err, sandbox.ErrClosed) {
					return // the kernel was already judged broken
				}
				t.Fatal(err)
			}
			switch c.name {
			case "fake image":
				if len(r.Images) != 0 || !strings.Contains(r.Stderr, "not a PNG") {
					t.Fatalf("%+v", r)
				}
			case "two answers":
				// The first answer is taken; the extras break the kernel.
				<-k.Done()
			default:
				if !r.Lost || r.Error == nil {
					t.Fatalf("want the kernel judged broken: %+v", r)
				}
			}
		})
	}
	// A kernel that never says ready, and one that says something else.
	f := &fakeKernel{ready: `{"type":"result","id":1}` + "\n"}
	if _, err := Start(context.Background(), f.exec, Options{StartTimeout: time.Second}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("result before ready: %v", err)
	}
	f = &fakeKernel{}
	if _, err := Start(context.Background(), f.exec, Options{StartTimeout: 200 * time.Millisecond}); !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("silent kernel: %v", err)
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"type":"ready","language":"python","version":"3.11"}`))
	f.Add([]byte(`{"type":"result","id":1,"stdout":"a","result":"1","error":{"name":"E","value":"v","traceback":"t"},"images":[{"format":"png","data":"iVBORw0KGgo="}]}`))
	f.Add([]byte(`{"type":"fatal","message":"x"} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			return
		}
		r := m.toResult()
		for _, im := range r.Images {
			if im.Format != "png" || !strings.HasPrefix(string(im.Data), string(pngMagic)) {
				t.Fatalf("unchecked image passed: %+v", im)
			}
		}
	})
}

// A kernel that writes while no answer is due is broken at once, so an
// idle kernel cannot make the host buffer its output.
func TestKernelSpeakingUnasked(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	k := &Kernel{stdin: pw, msgs: make(chan *message, 1), dead: make(chan struct{}), stderr: &tail{max: 10}}
	w := &lineWriter{k: k, max: 1 << 20}
	if n, err := w.Write([]byte("partial line without newline")); err != nil || n != 28 {
		t.Fatalf("write: %d %v", n, err)
	}
	select {
	case <-k.Done():
	default:
		t.Fatal("an unasked write must break the kernel")
	}
	if len(w.buf) != 0 {
		t.Fatal("nothing may be buffered")
	}
}
