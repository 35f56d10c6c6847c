// Package sandboxfake is an in-memory sandbox.Backend for the server's unit
// tests: processes are Go functions (echo, cat, true, false, sleep, exit,
// yes), files live in a map. It isolates nothing and must never be used
// outside tests or to prove a security property.
package sandboxfake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// Backend is the fake backend. The zero value is not usable: use New.
type Backend struct {
	name string
	mu   sync.Mutex
	live map[string]*Sandbox
	// Created counts Create calls that succeeded; Cleaned the IDs Cleanup removed.
	Created atomic.Int64
	// Kills counts Process.Kill calls on running processes (a group kill,
	// as opposed to a Signal to the process alone).
	Kills atomic.Int64
	// FailCreate, when set, makes Create fail with it.
	FailCreate error
	// CreateDelay is slept in Create (to tell pooled from cold creates).
	CreateDelay time.Duration
	specs       map[string]sandbox.Spec
}

// New returns a fake backend called name.
func New(name string) *Backend { return &Backend{name: name, live: map[string]*Sandbox{}} }

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return b.name }

// Probe implements sandbox.Backend.
func (b *Backend) Probe(context.Context) sandbox.Probe {
	return sandbox.Probe{Available: true, Isolation: "none", Details: map[string]string{"fake": "true"}}
}

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.FailCreate != nil {
		return nil, fmt.Errorf("create sandbox %q: %w", spec.ID, b.FailCreate)
	}
	if spec.Policy == nil {
		return nil, fmt.Errorf("create sandbox %q: nil policy: %w", spec.ID, sandbox.ErrInvalid)
	}
	if b.CreateDelay > 0 {
		select {
		case <-time.After(b.CreateDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live[spec.ID] != nil {
		return nil, fmt.Errorf("create sandbox %q: %w", spec.ID, sandbox.ErrExists)
	}
	s := &Sandbox{b: b, id: spec.ID, files: map[string]*node{"/": {dir: true, mode: 0o755}}, done: make(chan struct{}), env: spec.Env, audit: spec.Audit}
	s.files["/tmp"] = &node{dir: true, mode: 0o1777}
	for _, f := range spec.Files {
		s.mkdirAll(path.Dir(f.Path))
		s.files[f.Path] = &node{data: f.Data, mode: 0o444}
	}
	b.live[spec.ID] = s
	if b.specs == nil {
		b.specs = map[string]sandbox.Spec{}
	}
	b.specs[spec.ID] = spec
	b.Created.Add(1)
	return s, nil
}

// Spec returns the spec sandbox id was created with.
func (b *Backend) Spec(id string) (sandbox.Spec, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sp, ok := b.specs[id]
	return sp, ok
}

// Cleanup implements sandbox.Backend: destroys every live sandbox not kept.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	b.mu.Lock()
	var victims []*Sandbox
	for id, s := range b.live {
		if !keep[id] {
			victims = append(victims, s)
		}
	}
	b.mu.Unlock()
	for _, s := range victims {
		s.Destroy(ctx)
	}
	return nil
}

// Live returns the IDs of sandboxes not destroyed.
func (b *Backend) Live() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id := range b.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Processes returns how many processes run in all live sandboxes.
func (b *Backend) Processes() int {
	b.mu.Lock()
	sbs := make([]*Sandbox, 0, len(b.live))
	for _, s := range b.live {
		sbs = append(sbs, s)
	}
	b.mu.Unlock()
	n := 0
	for _, s := range sbs {
		s.mu.Lock()
		n += len(s.procs)
		s.mu.Unlock()
	}
	return n
}

// Kill makes sandbox id die as if its agent crashed.
func (b *Backend) Kill(id string) {
	b.mu.Lock()
	s := b.live[id]
	b.mu.Unlock()
	if s != nil {
		s.Destroy(context.Background())
	}
}

type node struct {
	dir  bool
	data []byte
	mode fs.FileMode
	link string
	mt   time.Time
	meta map[string]string
}

// Sandbox is a fake sandbox.
type Sandbox struct {
	b     *Backend
	id    string
	env   map[string]string
	audit audit.Sink
	mu    sync.Mutex
	dead  bool
	done  chan struct{}

	files map[string]*node
	procs map[*process]bool
	pid   int
}

// ID implements sandbox.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// Done implements sandbox.Sandbox.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Stats implements sandbox.Sandbox.
func (s *Sandbox) Stats(context.Context) (sandbox.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return sandbox.Stats{}, fmt.Errorf("stats of %q: %w", s.id, sandbox.ErrClosed)
	}
	return sandbox.Stats{Pids: len(s.procs) + 1}, nil
}

// Destroy implements sandbox.Sandbox.
func (s *Sandbox) Destroy(context.Context) error {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return nil
	}
	s.dead = true
	procs := s.procs
	s.procs = nil
	close(s.done)
	s.mu.Unlock()
	for p := range procs {
		p.cancel(128 + sandbox.SIGKILL)
	}
	s.b.mu.Lock()
	delete(s.b.live, s.id)
	s.b.mu.Unlock()
	return nil
}

func (s *Sandbox) closed() error {
	if s.dead {
		return fmt.Errorf("sandbox %q: %w", s.id, sandbox.ErrClosed)
	}
	return nil
}

// Exec implements sandbox.Sandbox with a few built-in commands.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if len(req.Args) == 0 {
		return nil, fmt.Errorf("exec: empty argv: %w", sandbox.ErrInvalid)
	}
	cmd, ok := commands[path.Base(req.Args[0])]
	if !ok {
		return nil, fmt.Errorf("exec %q: %w", req.Args[0], sandbox.ErrCommandNotFound)
	}
	s.mu.Lock()
	if err := s.closed(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.pid++
	p := &process{pid: s.pid + 1, b: s.b, done: make(chan struct{}), kill: make(chan int, 1), tty: req.TTY, rows: req.Rows, cols: req.Cols}
	if s.procs == nil {
		s.procs = map[*process]bool{}
	}
	s.procs[p] = true
	s.mu.Unlock()
	stdin := req.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	stdout, stderr := req.Stdout, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil || req.TTY {
		stderr = stdout
	}
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	p.stdin = &closableReader{r: stdin, closed: make(chan struct{})}
	go func() {
		code := cmd(&proc{p: p, args: req.Args, env: env, stdin: p.stdin, stdout: stdout, stderr: stderr, timeout: req.Timeout, audit: s.audit, sandbox: s.id})
		p.finish(code)
		s.mu.Lock()
		delete(s.procs, p)
		s.mu.Unlock()
	}()
	return p, nil
}

type closableReader struct {
	r      io.Reader
	once   sync.Once
	closed chan struct{}
}

func (c *closableReader) Read(b []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, io.EOF
	default:
	}
	return c.r.Read(b)
}

func (c *closableReader) Close() { c.once.Do(func() { close(c.closed) }) }

type process struct {
	pid   int
	tty   bool
	done  chan struct{}
	kill  chan int
	once  sync.Once
	exit  sandbox.ExitStatus
	stdin *closableReader

	b        *Backend
	timedOut atomic.Bool

	mu         sync.Mutex
	rows, cols uint16
}

func (p *process) finish(code int) {
	p.once.Do(func() {
		p.exit.Code = code
		if code > 128 {
			p.exit.Signal = code - 128
		}
		p.exit.TimedOut = p.timedOut.Load()
		close(p.done)
	})
}

func (p *process) cancel(code int) {
	select {
	case p.kill <- code:
	default:
	}
}

func (p *process) PID() int { return p.pid }

func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.exit, nil
	case <-ctx.Done():
		return sandbox.ExitStatus{}, ctx.Err()
	}
}

func (p *process) Signal(_ context.Context, sig int) error {
	select {
	case <-p.done:
		return fmt.Errorf("signal pid %d: %w", p.pid, sandbox.ErrNotFound)
	default:
	}
	p.cancel(128 + sig)
	return nil
}

// Kill ends the process (the fake has no descendants). Backend.Kills
// counts the calls, so tests can tell a group kill from a signal.
func (p *process) Kill(context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.b.Kills.Add(1)
	p.cancel(128 + sandbox.SIGKILL)
	return nil
}

func (p *process) Resize(_ context.Context, rows, cols uint16) error {
	if !p.tty {
		return fmt.Errorf("resize: no tty: %w", sandbox.ErrInvalid)
	}
	p.mu.Lock()
	p.rows, p.cols = rows, cols
	p.mu.Unlock()
	return nil
}

func (p *process) CloseStdin() error { p.stdin.Close(); return nil }

// proc is what a built-in command sees.
type proc struct {
	p       *process
	args    []string
	env     map[string]string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	timeout time.Duration
	audit   audit.Sink
	sandbox string
}

// sleep waits d or until killed; it returns the kill code or -1.
func (c *proc) sleep(d time.Duration) int {
	var tc <-chan time.Time
	if c.timeout > 0 && c.timeout < d {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-time.After(d):
		return -1
	case code := <-c.p.kill:
		return code
	case <-tc:
		c.p.timedOut.Store(true)
		return 128 + sandbox.SIGKILL
	}
}

var commands = map[string]func(c *proc) int{
	"true":  func(*proc) int { return 0 },
	"false": func(*proc) int { return 1 },
	"echo": func(c *proc) int {
		fmt.Fprintln(c.stdout, strings.Join(c.args[1:], " "))
		return 0
	},
	// printenv NAME
	"printenv": func(c *proc) int {
		if len(c.args) < 2 {
			return 2
		}
		v, ok := c.env[c.args[1]]
		if !ok {
			return 1
		}
		fmt.Fprintln(c.stdout, v)
		return 0
	},
	// cat copies stdin to stdout until EOF or a kill.
	"cat": func(c *proc) int {
		done := make(chan struct{})
		go func() { io.Copy(c.stdout, c.stdin); close(done) }()
		select {
		case <-done:
			return 0
		case code := <-c.p.kill:
			return code
		}
	},
	// err writes its arguments to stderr.
	"err": func(c *proc) int {
		fmt.Fprintln(c.stderr, strings.Join(c.args[1:], " "))
		return 0
	},
	// sleep SECONDS
	"sleep": func(c *proc) int {
		f, _ := strconv.ParseFloat(c.args[len(c.args)-1], 64)
		if code := c.sleep(time.Duration(f * float64(time.Second))); code >= 0 {
			return code
		}
		return 0
	},
	// exit CODE
	"exit": func(c *proc) int {
		n, _ := strconv.Atoi(c.args[len(c.args)-1])
		return n
	},
	// ticker N: prints N numbered lines, 10 ms apart.
	"ticker": func(c *proc) int {
		n, _ := strconv.Atoi(c.args[len(c.args)-1])
		for i := 0; i < n; i++ {
			fmt.Fprintf(c.stdout, "tick %d\n", i)
			if code := c.sleep(10 * time.Millisecond); code >= 0 {
				return code
			}
		}
		return 0
	},
	// blob N: writes N bytes 0..255 repeating.
	"blob": func(c *proc) int {
		n, _ := strconv.Atoi(c.args[len(c.args)-1])
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		c.stdout.Write(b)
		return 0
	},
	// violate reports a policy violation to the sandbox's audit sink, as a
	// backend does when a process hits a denied operation.
	"violate": func(c *proc) int {
		if c.audit != nil {
			c.audit.Emit(audit.Event{Sandbox: c.sandbox, Type: audit.TypeViolation, Message: "fake violation"})
		}
		return 1
	},
	// winsize prints the tty size; "winsize wait" then reads one byte of
	// input and prints it again.
	"winsize": func(c *proc) int {
		show := func() {
			c.p.mu.Lock()
			fmt.Fprintf(c.stdout, "%d %d\n", c.p.rows, c.p.cols)
			c.p.mu.Unlock()
		}
		show()
		if len(c.args) > 1 && c.args[1] == "wait" {
			var b [1]byte
			if _, err := c.stdin.Read(b[:]); err != nil {
				return 1
			}
			show()
		}
		return 0
	},
}

// Files implements sandbox.Sandbox.
func (s *Sandbox) Files() sandbox.Files { return files{s} }

type files struct{ s *Sandbox }

func (s *Sandbox) mkdirAll(p string) {
	for p != "/" && s.files[p] == nil {
		s.files[p] = &node{dir: true, mode: 0o755, mt: time.Now()}
		p = path.Dir(p)
	}
}

func (s *Sandbox) check(op, p string) error {
	if err := s.closed(); err != nil {
		return err
	}
	if !path.IsAbs(p) || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%s %q: %w", op, p, sandbox.ErrInvalid)
	}
	// Refuse to go through a symlink (the fake only stores them).
	for q := path.Dir(p); q != "/"; q = path.Dir(q) {
		if n := s.files[q]; n != nil && n.link != "" {
			return fmt.Errorf("%s %q: through a symlink: %w", op, p, sandbox.ErrPermission)
		}
	}
	return nil
}

// AddSymlink stores a symlink at p (for tests of link handling).
func (s *Sandbox) AddSymlink(p, target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mkdirAll(path.Dir(p))
	s.files[p] = &node{link: target, mode: fs.ModeSymlink | 0o777}
}

func (f files) ReadFile(_ context.Context, p string) (io.ReadCloser, error) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("read", p); err != nil {
		return nil, err
	}
	n := s.files[p]
	if n == nil {
		return nil, fmt.Errorf("read %q: %w", p, sandbox.ErrNotFound)
	}
	if n.dir || n.link != "" {
		return nil, fmt.Errorf("read %q: not a regular file: %w", p, sandbox.ErrInvalid)
	}
	return io.NopCloser(bytes.NewReader(append([]byte(nil), n.data...))), nil
}

func (f files) WriteFile(_ context.Context, p string, r io.Reader, mode fs.FileMode, mkdirs bool) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("write %q: %w", p, err)
	}
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("write", p); err != nil {
		return err
	}
	if n := s.files[p]; n != nil && (n.dir || n.link != "") {
		return fmt.Errorf("write %q: not a regular file: %w", p, sandbox.ErrInvalid)
	}
	parent := s.files[path.Dir(p)]
	if parent == nil {
		if !mkdirs {
			return fmt.Errorf("write %q: parent: %w", p, sandbox.ErrNotFound)
		}
		s.mkdirAll(path.Dir(p))
	} else if !parent.dir {
		return fmt.Errorf("write %q: parent not a directory: %w", p, sandbox.ErrInvalid)
	}
	s.files[p] = &node{data: data, mode: mode.Perm(), mt: time.Now()}
	return nil
}

func (s *Sandbox) info(p string, n *node) sandbox.FileInfo {
	fi := sandbox.FileInfo{Name: path.Base(p), Path: p, Size: int64(len(n.data)), Mode: n.mode, ModTime: n.mt, IsDir: n.dir, Link: n.link}
	if n.dir {
		fi.Mode |= fs.ModeDir
	}
	fi.Metadata = maps.Clone(n.meta)
	return fi
}

// SetMetadata implements sandbox.MetadataFiles.
func (f files) SetMetadata(_ context.Context, p string, m map[string]string) error {
	if err := sandbox.CheckMetadata(m); err != nil {
		return err
	}
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("set metadata", p); err != nil {
		return err
	}
	n := s.files[p]
	if n == nil {
		return fmt.Errorf("set metadata %q: %w", p, sandbox.ErrNotFound)
	}
	if n.link != "" {
		return fmt.Errorf("set metadata %q: not a regular file or directory: %w", p, sandbox.ErrInvalid)
	}
	n.meta = nil
	if len(m) > 0 {
		n.meta = maps.Clone(m)
	}
	return nil
}

func (f files) Stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("stat", p); err != nil {
		return sandbox.FileInfo{}, err
	}
	n := s.files[p]
	if n == nil {
		return sandbox.FileInfo{}, fmt.Errorf("stat %q: %w", p, sandbox.ErrNotFound)
	}
	return s.info(p, n), nil
}

func (f files) List(_ context.Context, p string) ([]sandbox.FileInfo, error) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("list", p); err != nil {
		return nil, err
	}
	n := s.files[p]
	if n == nil {
		return nil, fmt.Errorf("list %q: %w", p, sandbox.ErrNotFound)
	}
	if !n.dir {
		return nil, fmt.Errorf("list %q: not a directory: %w", p, sandbox.ErrInvalid)
	}
	var out []sandbox.FileInfo
	for q, c := range s.files {
		if q != "/" && path.Dir(q) == p {
			out = append(out, s.info(q, c))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f files) Mkdir(_ context.Context, p string, mode fs.FileMode, parents bool) error {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("mkdir", p); err != nil {
		return err
	}
	if n := s.files[p]; n != nil {
		if n.dir && parents {
			return nil
		}
		return fmt.Errorf("mkdir %q: %w", p, sandbox.ErrExists)
	}
	if s.files[path.Dir(p)] == nil && !parents {
		return fmt.Errorf("mkdir %q: parent: %w", p, sandbox.ErrNotFound)
	}
	s.mkdirAll(path.Dir(p))
	s.files[p] = &node{dir: true, mode: mode.Perm(), mt: time.Now()}
	return nil
}

func (f files) Remove(_ context.Context, p string, recursive bool) error {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("remove", p); err != nil {
		return err
	}
	if s.files[p] == nil {
		return fmt.Errorf("remove %q: %w", p, sandbox.ErrNotFound)
	}
	for q := range s.files {
		if strings.HasPrefix(q, p+"/") {
			if !recursive {
				return fmt.Errorf("remove %q: directory not empty: %w", p, sandbox.ErrInvalid)
			}
			delete(s.files, q)
		}
	}
	delete(s.files, p)
	return nil
}

func (f files) Rename(_ context.Context, from, to string) error {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("rename", from); err != nil {
		return err
	}
	if err := s.check("rename", to); err != nil {
		return err
	}
	n := s.files[from]
	if n == nil {
		return fmt.Errorf("rename %q: %w", from, sandbox.ErrNotFound)
	}
	if s.files[path.Dir(to)] == nil {
		return fmt.Errorf("rename to %q: parent: %w", to, sandbox.ErrNotFound)
	}
	// As rename(2): a file never replaces a directory (EISDIR), nor a
	// directory a file (ENOTDIR), nor a non-empty directory (ENOTEMPTY).
	if t := s.files[to]; t != nil && to != from {
		switch {
		case t.dir && !n.dir:
			return fmt.Errorf("rename to %q: is a directory: %w", to, sandbox.ErrInvalid)
		case !t.dir && n.dir:
			return fmt.Errorf("rename to %q: not a directory: %w", to, sandbox.ErrInvalid)
		case t.dir:
			for q := range s.files {
				if strings.HasPrefix(q, to+"/") {
					return fmt.Errorf("rename to %q: directory not empty: %w", to, sandbox.ErrInvalid)
				}
			}
		}
	}
	for q, c := range s.files {
		if strings.HasPrefix(q, from+"/") {
			delete(s.files, q)
			s.files[to+strings.TrimPrefix(q, from)] = c
		}
	}
	delete(s.files, from)
	s.files[to] = n
	return nil
}

// AddSymlinkIn stores a symlink in live sandbox id (tests of link handling).
func (b *Backend) AddSymlinkIn(t interface{ Fatalf(string, ...any) }, id, p, target string) {
	b.mu.Lock()
	s := b.live[id]
	b.mu.Unlock()
	if s == nil {
		t.Fatalf("no live fake sandbox %q", id)
		return
	}
	s.AddSymlink(p, target)
}
