package sandboxtest

// A "backend" with no isolation at all: processes run straight on the host
// and Files touches host paths. The suite must fail it: that proves its
// checks can fail (a suite every backend passes by construction would
// prove nothing).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

const fakeTagVar = "SANDBOXTEST_FAKE_TAG"

type hostBackend struct{}

func (hostBackend) Name() string                                   { return "host-unconfined" }
func (hostBackend) Probe(context.Context) sandbox.Probe            { return sandbox.Probe{Available: true} }
func (hostBackend) Cleanup(context.Context, map[string]bool) error { return nil }
func (hostBackend) Create(_ context.Context, sp sandbox.Spec) (sandbox.Sandbox, error) {
	if sp.Policy == nil || sp.ID == "" || !filepath.IsAbs(sp.Policy.Filesystem.WorkspacePath()) {
		return nil, fmt.Errorf("create: %w", sandbox.ErrInvalid)
	}
	return &hostSandbox{id: sp.ID, ws: sp.Policy.Filesystem.WorkspacePath(), done: make(chan struct{})}, nil
}

type hostSandbox struct {
	id, ws string
	once   sync.Once
	done   chan struct{}
	mu     sync.Mutex
	procs  []*hostProcess
}

func (s *hostSandbox) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *hostSandbox) ID() string            { return s.id }
func (s *hostSandbox) Done() <-chan struct{} { return s.done }
func (s *hostSandbox) Files() sandbox.Files  { return hostFiles{s} }
func (s *hostSandbox) Destroy(context.Context) error {
	s.once.Do(func() { close(s.done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs { // its direct children only: detached ones leak
		p.c.Process.Kill()
	}
	return nil
}
func (s *hostSandbox) Stats(context.Context) (sandbox.Stats, error) {
	if s.closed() {
		return sandbox.Stats{}, sandbox.ErrClosed
	}
	return sandbox.Stats{}, nil
}

func (s *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.closed() {
		return nil, sandbox.ErrClosed
	}
	if len(req.Args) == 0 {
		return nil, sandbox.ErrInvalid
	}
	if req.TTY {
		return nil, sandbox.ErrNotSupported
	}
	c := exec.Command(req.Args[0], req.Args[1:]...)
	c.Dir = req.Dir
	if c.Dir == "" {
		c.Dir = s.ws
	}
	c.Env = append(os.Environ(), fakeTagVar+"="+os.Getenv(fakeTagVar))
	for k, v := range req.Env {
		c.Env = append(c.Env, k+"="+v)
	}
	c.Stdin, c.Stdout, c.Stderr = req.Stdin, req.Stdout, req.Stderr
	if err := c.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("exec: %w", sandbox.ErrNotFound)
		}
		return nil, err
	}
	p := &hostProcess{c: c, done: make(chan struct{})}
	if req.Timeout > 0 {
		timer := time.AfterFunc(req.Timeout, func() { p.timedOut.Store(true); c.Process.Kill() })
		defer func() { go func() { <-p.done; timer.Stop() }() }()
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	go func() { p.err = c.Wait(); close(p.done) }()
	return p, nil
}

type hostProcess struct {
	c        *exec.Cmd
	err      error
	done     chan struct{}
	timedOut atomic.Bool
}

func (p *hostProcess) PID() int { return p.c.Process.Pid }
func (p *hostProcess) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return sandbox.ExitStatus{}, ctx.Err()
	}
	ws := p.c.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return sandbox.ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal()), TimedOut: p.timedOut.Load()}, nil
	}
	return sandbox.ExitStatus{Code: ws.ExitStatus()}, nil
}
func (p *hostProcess) Signal(_ context.Context, sig int) error {
	return p.c.Process.Signal(syscall.Signal(sig))
}
func (p *hostProcess) Kill(context.Context) error {
	p.c.Process.Kill() // the process alone: its children live on
	return nil
}
func (p *hostProcess) Resize(context.Context, uint16, uint16) error { return sandbox.ErrInvalid }
func (p *hostProcess) CloseStdin() error                            { return nil }

type hostFiles struct{ s *hostSandbox }

func (f hostFiles) check(path string) error {
	if f.s.closed() {
		return sandbox.ErrClosed
	}
	if !filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return sandbox.ErrInvalid
	}
	return nil
}

func kind(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%v: %w", err, sandbox.ErrNotFound)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%v: %w", err, sandbox.ErrExists)
	}
	return err
}

func (f hostFiles) ReadFile(_ context.Context, path string) (io.ReadCloser, error) {
	if err := f.check(path); err != nil {
		return nil, err
	}
	r, err := os.Open(path)
	return r, kind(err)
}

func (f hostFiles) WriteFile(_ context.Context, path string, r io.Reader, mode fs.FileMode, mkdirs bool) error {
	if err := f.check(path); err != nil {
		return err
	}
	if mkdirs {
		os.MkdirAll(filepath.Dir(path), 0o755)
	}
	var b bytes.Buffer
	io.Copy(&b, r)
	if err := os.WriteFile(path, b.Bytes(), mode); err != nil {
		return kind(err)
	}
	return os.Chmod(path, mode)
}

func info(path string, fi fs.FileInfo) sandbox.FileInfo {
	out := sandbox.FileInfo{Name: fi.Name(), Path: path, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		out.Link, _ = os.Readlink(path)
	}
	return out
}

func (f hostFiles) Stat(_ context.Context, path string) (sandbox.FileInfo, error) {
	if err := f.check(path); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return sandbox.FileInfo{}, kind(err)
	}
	return info(path, fi), nil
}

func (f hostFiles) List(_ context.Context, path string) ([]sandbox.FileInfo, error) {
	if err := f.check(path); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, kind(err)
	}
	var out []sandbox.FileInfo
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			out = append(out, info(filepath.Join(path, e.Name()), fi))
		}
	}
	return out, nil
}

func (f hostFiles) Mkdir(_ context.Context, path string, mode fs.FileMode, parents bool) error {
	if err := f.check(path); err != nil {
		return err
	}
	if parents {
		return kind(os.MkdirAll(path, mode))
	}
	return kind(os.Mkdir(path, mode))
}

func (f hostFiles) Remove(_ context.Context, path string, recursive bool) error {
	if err := f.check(path); err != nil {
		return err
	}
	if _, err := os.Lstat(path); err != nil {
		return kind(err)
	}
	if recursive {
		return os.RemoveAll(path)
	}
	return kind(os.Remove(path))
}

func (f hostFiles) Rename(_ context.Context, from, to string) error {
	if err := f.check(from); err != nil {
		return err
	}
	return kind(os.Rename(from, to))
}

// TestSuiteFailsUnconfinedBackend runs the suite against hostBackend in a
// child test process and requires the isolation checks to fail there while
// the plain functional ones pass.
func TestSuiteFailsUnconfinedBackend(t *testing.T) {
	if os.Getenv(fakeTagVar) != "" {
		Run(t, hostBackend{}, Options{
			Spec: func(t *testing.T) sandbox.Spec {
				p, _ := policy.Profile("default")
				ws := t.TempDir()
				rp, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: t.TempDir(), UID: os.Getuid(), GID: os.Getgid()})
				if err != nil {
					t.Fatal(err)
				}
				return sandbox.Spec{Policy: rp}
			},
			NotApplicable: map[string]string{"exec/pty": "no terminals", "exec/pty-resize": "no terminals"},
			LeakCheck:     func(t *testing.T, id string) error { return HostLeaks(id) },
		})
		return
	}
	tag := "fake-" + randHex(6)
	defer killTagged(tag)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteFailsUnconfinedBackend$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fakeTagVar+"="+tag)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a backend with no isolation at all:\n%s", out)
	}
	for _, check := range []string{"files/traversal", "files/symlink-out", "limits/memory", "limits/pids", "limits/output", "destroy/no-leaks", "exec/kill-group"} {
		if !bytes.Contains(out, []byte("--- FAIL: TestSuiteFailsUnconfinedBackend/"+check)) {
			t.Errorf("check %s did not fail on the unconfined backend", check)
		}
	}
	for _, check := range []string{"exec/stdout-stderr", "exec/exit-codes", "exec/stdin", "files/round-trip", "concurrent/execs"} {
		if !bytes.Contains(out, []byte("--- PASS: TestSuiteFailsUnconfinedBackend/"+check)) {
			t.Errorf("functional check %s did not pass on the unconfined backend (the suite is broken, not the backend)", check)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// killTagged kills processes the fake backend left behind (it has no way to
// end them: that is one of the things the suite must catch).
func killTagged(tag string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(b, []byte(fakeTagVar+"="+tag)) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			if pid > 0 && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
