package wasm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// Why a process ended early (the cause of its context).
var (
	errTimedOut  = errors.New("wall timeout")
	errMemory    = errors.New("memory limit")
	errDestroyed = errors.New("sandbox destroyed")
	errKilled    = errors.New("killed")
)

// killedCode is the exit code of a module stopped by a limit or by Destroy:
// 128+SIGKILL, what the other backends report for a killed process.
const killedCode = 128 + sandbox.SIGKILL

// process is one module instance running in its own goroutine.
type process struct {
	s      *wasmSandbox
	argv0  string
	mem    *memLimit
	out    *outputLimit
	stdin  *stdinPump
	ctx    context.Context
	cancel context.CancelCauseFunc
	exited chan struct{}
	cfg    wazero.ModuleConfig
	dir    string
	status sandbox.ExitStatus
}

// Exec implements sandbox.Sandbox. Args[0] without a slash is a registered
// command (ruby, or Config.Commands); with a slash it is a .wasm file inside
// the sandbox, relative to the working directory unless absolute.
func (s *wasmSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if len(req.Args) == 0 || req.Args[0] == "" {
		return nil, fmt.Errorf("exec in %q: empty command: %w", s.id, sandbox.ErrInvalid)
	}
	name := req.Args[0]
	if req.TTY {
		return nil, fmt.Errorf("exec %q in %q: terminal: %w", name, s.id, sandbox.ErrNotSupported)
	}
	if req.User != "" {
		return nil, fmt.Errorf("exec %q in %q as %q: WASI programs have no users: %w", name, s.id, req.User, sandbox.ErrNotSupported)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("exec %q in %q: %w", name, s.id, sandbox.ErrClosed)
	}
	dir := s.workdir
	if req.Dir != "" {
		dir = req.Dir
	}
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("exec %q in %q: working directory %q not absolute: %w", name, s.id, dir, sandbox.ErrInvalid)
	}
	prog, err := s.lookup(ctx, name, dir)
	if err != nil {
		return nil, fmt.Errorf("exec %q in %q: %w", name, s.id, err)
	}
	limit := uint64(max(s.pol.Limits.Memory, 0))
	if limit > 0 && uint64(prog.minPages)*65536+uint64(max(s.memUsed.Load(), 0)) > limit {
		s.violations.Add(1)
		return nil, fmt.Errorf("exec %q in %q: module needs %d MiB of memory at start, the sandbox's limit is %d MiB (%d MiB in use): %w",
			name, s.id, uint64(prog.minPages)>>4, limit>>20, s.memUsed.Load()>>20, sandbox.ErrLimit)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = s.pol.Limits.Timeout.D()
	}

	p := &process{s: s, argv0: name, dir: dir, exited: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(s.ctx)
	if timeout > 0 {
		var stop context.CancelFunc
		p.ctx, stop = context.WithTimeoutCause(p.ctx, timeout, errTimedOut)
		parentCancel := p.cancel
		p.cancel = func(cause error) { parentCancel(cause); stop() }
	}
	p.mem = &memLimit{limit: limit, pool: &s.memUsed, poolPeak: &s.peak, onExceed: func() { p.cancel(errMemory) }}
	p.out = &outputLimit{limit: int64(max(s.pol.Limits.OutputBytes, 0))}
	p.stdin = newStdinPump(req.Stdin)
	stdout, stderr := p.out.writer(req.Stdout), p.out.writer(req.Stderr)

	p.cfg = s.moduleConfig(p, req, dir, stdout, stderr)
	if prog.kind == kindRuby {
		p.cfg = p.cfg.WithStartFunctions("_initialize").WithArgs(req.Args[0])
	} else {
		p.cfg = p.cfg.WithArgs(req.Args...)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.cancel(errDestroyed)
		return nil, fmt.Errorf("exec %q in %q: %w", name, s.id, sandbox.ErrClosed)
	}
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	s.emit(audit.TypeExec, "exec "+name, map[string]any{"args": req.Args, "dir": dir})

	context.AfterFunc(p.ctx, p.stdin.stop)
	go p.run(prog, req.Args, stderr)
	return p, nil
}

func (s *wasmSandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *wasmSandbox) emit(typ, msg string, fields map[string]any) {
	if s.audit == nil {
		return
	}
	s.audit.Emit(audit.Event{Time: time.Now(), Sandbox: s.id, Type: typ, Message: msg, Fields: fields})
}

// moduleConfig is the WASI world of one process.
func (s *wasmSandbox) moduleConfig(p *process, req sandbox.ExecRequest, dir string, stdout, stderr io.Writer) wazero.ModuleConfig {
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	env["PWD"] = dir
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ctx := p.ctx
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStdin(p.stdin).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(s.mounts.fsConfig(&fdBudget{limit: int64(s.pol.Limits.OpenFiles)})).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}).
		WithRandSource(rand.Reader)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, env[k])
	}
	return cfg
}

// lookup finds and compiles the module for name.
func (s *wasmSandbox) lookup(ctx context.Context, name, dir string) (*program, error) {
	if !strings.Contains(name, "/") {
		hostPath, k, ok := s.b.lookupCommand(name)
		if !ok {
			return nil, fmt.Errorf("%s: not a registered command (registered: %s): %w", name, strings.Join(s.b.commandNames(), ", "), sandbox.ErrCommandNotFound)
		}
		p, err := s.b.hostProgram(ctx, hostPath, k)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s is not installed (%s missing; run `make wasm-assets`): %w", name, hostPath, sandbox.ErrCommandNotFound)
		case errors.Is(err, errNotWasm):
			return nil, fmt.Errorf("%s: %w: %w", hostPath, err, sandbox.ErrCannotExecute)
		case err != nil:
			return nil, err
		}
		return p, nil
	}
	guest := name
	if !path.IsAbs(guest) {
		guest = path.Join(dir, guest)
	}
	m, rel, err := s.mounts.resolve(guest)
	if err != nil {
		return nil, err
	}
	data, err := readLimited(rel, func(rel string) (*os.File, error) {
		f, err := m.root.Open(rel)
		if err != nil {
			return nil, err
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("not a regular file: %w", sandbox.ErrCannotExecute)
		}
		return f, nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w", guest, sandbox.ErrCommandNotFound)
	case err != nil && isEscape(err):
		return nil, fmt.Errorf("%s: leaves the sandbox's filesystem: %w", guest, sandbox.ErrPermission)
	case errors.Is(err, sandbox.ErrLimit), errors.Is(err, sandbox.ErrPermission):
		return nil, fmt.Errorf("%s: %w", guest, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %v: %w", guest, err, sandbox.ErrPermission)
	}
	p, _, err := s.b.compile(ctx, data, kindCommand)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", guest, err, sandbox.ErrCannotExecute)
	}
	return p, nil
}

// commandNames lists the registered command names.
func (b *Backend) commandNames() []string {
	var names []string
	for _, a := range builtinAssets {
		names = append(names, a.name)
	}
	for n := range b.cfg.Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// run instantiates the module (running _start) and records how it ended.
func (p *process) run(prog *program, args []string, stderr io.Writer) {
	s := p.s
	ctx := experimental.WithMemoryAllocator(p.ctx, p.mem)
	start := time.Now()
	mod, err := s.b.rt.InstantiateModule(ctx, prog.cm, p.cfg)
	if err == nil && prog.kind == kindRuby {
		err = runRuby(ctx, mod, args, p.dir)
	}
	cause := context.Cause(p.ctx)
	if mod != nil {
		mod.Close(context.WithoutCancel(ctx))
	}
	p.status = p.exitStatus(err, cause, stderr)
	p.cancel(nil)
	p.stdin.stop()
	fields := map[string]any{"exit_code": p.status.Code, "duration_ms": time.Since(start).Milliseconds()}
	if p.status.TimedOut || p.status.OOM || p.status.Truncated {
		s.violations.Add(1)
		s.emit(audit.TypeLimit, p.limitMessage(), fields)
	}
	s.emit(audit.TypeExit, "exit "+p.argv0, fields)
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
	close(p.exited)
}

func (p *process) limitMessage() string {
	switch {
	case p.status.OOM:
		return fmt.Sprintf("%s stopped: memory limit of %d bytes", p.argv0, p.mem.limit)
	case p.status.TimedOut:
		return p.argv0 + " stopped: wall timeout"
	default:
		return fmt.Sprintf("%s output cut at %d bytes", p.argv0, p.out.limit)
	}
}

// exitStatus maps how wazero returned to an exit status. A trap (a wasm
// runtime error) is exit code 1, with the trap written to stderr.
func (p *process) exitStatus(err, cause error, stderr io.Writer) sandbox.ExitStatus {
	st := sandbox.ExitStatus{}
	var exit *sys.ExitError
	switch {
	case p.mem.exceeded.Load():
		st.OOM, st.Code, st.Signal = true, killedCode, sandbox.SIGKILL
		fmt.Fprintf(stderr, "airlock: %s stopped: memory limit of %d MiB exceeded\n", p.argv0, p.mem.limit>>20)
	case errors.Is(cause, errTimedOut):
		// Also when the module then ended by itself: stopping it (e.g.
		// ending its stdin) is what made it end.
		st.TimedOut, st.Code, st.Signal = true, killedCode, sandbox.SIGKILL
	case cause != nil:
		st.Code, st.Signal = killedCode, sandbox.SIGKILL
	case err == nil:
	case errors.As(err, &exit):
		st.Code = int(exit.ExitCode())
		if st.Code > 255 || st.Code < 0 {
			st.Code = 255
		}
	default:
		st.Code = 1
		fmt.Fprintf(stderr, "airlock: %s: wasm trap: %v\n", p.argv0, err)
	}
	st.Truncated = p.out.truncated()
	return st
}

// PID implements sandbox.Process; modules have no process IDs.
func (p *process) PID() int { return 0 }

// Wait implements sandbox.Process.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.exited:
		return p.status, nil
	case <-ctx.Done():
		return sandbox.ExitStatus{}, fmt.Errorf("wait %s: %w", p.argv0, ctx.Err())
	}
}

// Signal implements sandbox.Process: WASI has no signals.
func (p *process) Signal(ctx context.Context, sig int) error {
	return fmt.Errorf("signal %d to %s: %w", sig, p.argv0, sandbox.ErrNotSupported)
}

// Kill implements sandbox.Process: the module's context ends, which stops
// it (a module starts no other processes). Nil once it has exited.
func (p *process) Kill(ctx context.Context) error {
	p.cancel(errKilled)
	return nil
}

// Resize implements sandbox.Process: wasm processes never have a TTY.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	return fmt.Errorf("resize %s: no terminal: %w", p.argv0, sandbox.ErrInvalid)
}

// CloseStdin implements sandbox.Process.
func (p *process) CloseStdin() error {
	p.stdin.closeInput()
	return nil
}

// outputLimit bounds the bytes a process writes to stdout and stderr
// together. Past the limit, writes are dropped (and reported as written, so
// the guest is not disturbed) and the exit status says Truncated.
type outputLimit struct {
	mu    sync.Mutex
	limit int64 // 0: unlimited
	used  int64
	cut   bool
}

func (o *outputLimit) writer(w io.Writer) io.Writer {
	if w == nil {
		w = io.Discard
	}
	return &limitedWriter{o: o, w: w}
}

func (o *outputLimit) truncated() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

type limitedWriter struct {
	o *outputLimit
	w io.Writer
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	o := l.o
	o.mu.Lock()
	n := len(b)
	if o.limit > 0 {
		room := o.limit - o.used
		if int64(n) > room {
			n = int(max(room, 0))
			o.cut = true
		}
	}
	o.used += int64(n)
	o.mu.Unlock()
	if n > 0 {
		if _, err := l.w.Write(b[:n]); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// stdinPump feeds a module's stdin through a pipe, so that a module blocked
// reading it is released when it is stopped (a read from the caller's
// reader itself could not be interrupted).
type stdinPump struct {
	pr   *io.PipeReader
	pw   *io.PipeWriter
	once sync.Once
}

func newStdinPump(r io.Reader) *stdinPump {
	pr, pw := io.Pipe()
	p := &stdinPump{pr: pr, pw: pw}
	if r == nil {
		pw.Close()
		return p
	}
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err)
	}()
	return p
}

func (p *stdinPump) Read(b []byte) (int, error) { return p.pr.Read(b) }

func (p *stdinPump) closeInput() { p.pw.Close() }

// stop releases a reader blocked in the module and ends the copy.
func (p *stdinPump) stop() {
	p.once.Do(func() { p.pr.CloseWithError(io.EOF) })
}
