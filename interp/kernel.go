package interp

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

//go:embed kernel.py
var pythonKernel string

//go:embed kernel.js
var javascriptKernel string

// Languages a kernel can be started for.
const (
	Python     = "python"
	JavaScript = "javascript"
	// Bash is a bash process kept across cells (variables, functions,
	// working directory), driven by the Python kernel: it needs python3
	// in the sandbox. Only streamed runs (RunStream) use it.
	Bash = "bash"
)

// Languages returns the languages Start accepts, default first.
func Languages() []string { return []string{Python, JavaScript} }

// Bounds on what a kernel may make the host hold or wait for.
const (
	DefaultMaxMessage     = 32 << 20
	DefaultStartTimeout   = 30 * time.Second
	DefaultInterruptGrace = 5 * time.Second
	maxImages             = 64
	stderrTail            = 4 << 10
)

// Exec starts a process in the sandbox (sandbox.Sandbox.Exec).
type Exec func(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error)

// Options configure Start.
type Options struct {
	Language string            // Python (default) or JavaScript
	Env      map[string]string // the kernel's (and its cells') environment additions
	Dir      string            // working directory inside; empty: the sandbox's
	// MaxMessage bounds one message from the kernel (DefaultMaxMessage).
	MaxMessage int
	// StartTimeout bounds the wait for the kernel's ready message.
	StartTimeout time.Duration
	// InterruptGrace is how long an interrupted cell may take to stop
	// before the kernel is killed.
	InterruptGrace time.Duration
}

// Result is the outcome of one cell.
type Result struct {
	Stdout string
	Stderr string
	// Value is the repr of the cell's last expression (nil: none, or None).
	Value *string
	// Error is set when the cell raised (or was interrupted, or the kernel
	// died: then Lost is set too).
	Error  *CellError
	Images []Image
	// Data is every representation of the last expression's value
	// (text, html, svg, png, json, ...), and Displays those of what the
	// cell displayed (figures with their chart data): set by RunStream.
	Data           Bundle
	Displays       []Bundle
	Truncated      bool // stdout or stderr was cut at the kernel's limit
	ExecutionCount int
	// Lost reports that the kernel is gone after this cell (it died or had
	// to be killed): the next cell starts with empty state.
	Lost bool
}

// CellError describes an exception raised by a cell.
type CellError struct {
	Name      string
	Value     string
	Traceback string
}

// Image is a figure the cell produced (PNG).
type Image struct {
	Format string
	Data   []byte
}

// Error names the kernel gives, beside the language's own exception names.
const (
	ErrNameTimeout = "TimeoutError"
	ErrNameDied    = "KernelDied"
)

// message is one line from a kernel.
type message struct {
	Type     string  `json:"type"`
	ID       *int64  `json:"id"`
	Language string  `json:"language"`
	Version  string  `json:"version"`
	Message  string  `json:"message"`
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
	Result   *string `json:"result"`
	Error    *struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		Traceback string `json:"traceback"`
	} `json:"error"`
	Images []struct {
		Format string `json:"format"`
		Data   []byte `json:"data"`
	} `json:"images"`
	Name           string   `json:"name"` // stream: stdout or stderr
	Text           string   `json:"text"`
	Data           Bundle   `json:"data"`
	Displays       []Bundle `json:"displays"`
	Truncated      bool     `json:"truncated"`
	ExecutionCount int      `json:"execution_count"`
}

// parseMessage decodes one line from a kernel; anything but one JSON object
// of a known type is an error.
func parseMessage(line []byte) (*message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("malformed message: %v", err)
	}
	if dec.More() {
		return nil, errors.New("malformed message: trailing data")
	}
	switch m.Type {
	case "ready", "result", "fatal", "stream":
	default:
		return nil, fmt.Errorf("unknown message type %q", clipString(m.Type, 32))
	}
	if m.Type == "stream" && m.Name != "stdout" && m.Name != "stderr" {
		return nil, fmt.Errorf("stream %q: want stdout or stderr", clipString(m.Name, 32))
	}
	if len(m.Images) > maxImages || len(m.Displays) > maxImages {
		return nil, fmt.Errorf("%d images, at most %d", len(m.Images), maxImages)
	}
	return &m, nil
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// toResult converts a result message; images that are not PNG are dropped
// with a note (the host never hands on bytes it did not check the type of).
func (m *message) toResult() *Result {
	r := &Result{Stdout: m.Stdout, Stderr: m.Stderr, Value: m.Result, Truncated: m.Truncated, ExecutionCount: m.ExecutionCount}
	if m.Error != nil {
		r.Error = &CellError{Name: m.Error.Name, Value: m.Error.Value, Traceback: m.Error.Traceback}
	}
	r.Data = m.Data.checked()
	for _, d := range m.Displays {
		if d = d.checked(); len(d) > 0 {
			r.Displays = append(r.Displays, d)
		}
	}
	for _, im := range m.Images {
		if im.Format != "png" || !bytes.HasPrefix(im.Data, pngMagic) {
			r.Stderr += "[airlock: an image that is not a PNG was dropped]\n"
			continue
		}
		r.Images = append(r.Images, Image{Format: "png", Data: im.Data})
	}
	return r
}

// Kernel is one running interpreter. Run may be called from several
// goroutines: cells run one at a time, in call order as far as the callers'
// arrival decides it.
type Kernel struct {
	lang    string
	version string
	opts    Options
	proc    sandbox.Process
	stdin   *io.PipeWriter
	msgs    chan *message
	stderr  *tail
	sem     chan struct{}
	nextID  int64
	// onStream receives a streamed cell's output (nil: none is due).
	onStream atomic.Pointer[func(name, text string)]
	// listening is set while an answer is due (ready, a cell's result). A
	// kernel speaks only when asked: output at any other time is a
	// violation, so an idle kernel cannot make the host buffer anything.
	listening atomic.Bool

	failOnce sync.Once
	dead     chan struct{}
	deadErr  error
}

// Start starts a kernel for o.Language through exec and waits until it is
// ready. A missing interpreter is an error wrapping sandbox.ErrNotFound.
func Start(ctx context.Context, exec Exec, o Options) (*Kernel, error) {
	o.defaults()
	binary, args, env, err := kernelCommand(o)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	k := &Kernel{lang: o.Language, opts: o, stdin: pw, msgs: make(chan *message, 1),
		stderr: &tail{max: stderrTail}, sem: make(chan struct{}, 1), dead: make(chan struct{})}
	k.listening.Store(true) // for the ready message
	p, err := exec(ctx, sandbox.ExecRequest{Args: args, Env: env, Dir: o.Dir, Stdin: pr,
		Stdout: &lineWriter{k: k, max: o.MaxMessage}, Stderr: k.stderr})
	if err != nil {
		pr.Close()
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil, fmt.Errorf("start %s interpreter: %s is not installed in this sandbox: %w", o.Language, binary, err)
		}
		return nil, fmt.Errorf("start %s interpreter: %w", o.Language, err)
	}
	k.proc = p
	k.watch(p, pr)
	return k.awaitReady(ctx)
}

// defaults fills in what o leaves zero.
func (o *Options) defaults() {
	if o.Language == "" {
		o.Language = Python
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
}

// kernelCommand is the interpreter binary of o.Language, the command
// line that runs its kernel, and its environment (o.Env last).
func kernelCommand(o Options) (binary string, args []string, env map[string]string, err error) {
	env = map[string]string{}
	switch o.Language {
	case Python, Bash:
		binary = "python3"
		args = []string{"python3", "-c", pythonKernel, o.Language}
		env["PYTHONDONTWRITEBYTECODE"] = "1" // no __pycache__ in the user's files
		env["PYTHONIOENCODING"] = "utf-8:backslashreplace"
	case JavaScript:
		binary = "node"
		// Requests on fd 4, answers on fd 3; the cells' stdin is /dev/null
		// and their fd 1 the kernel's stderr (see kernel.js).
		args = []string{"/bin/sh", "-c", `exec node -e "$1" 3>&1 4<&0 0</dev/null 1>&2`, "airlock-kernel", javascriptKernel}
	default:
		return "", nil, nil, fmt.Errorf("start interpreter: language %q: want %s or bash: %w", o.Language, strings.Join(Languages(), ", "), sandbox.ErrInvalid)
	}
	for k, v := range o.Env {
		env[k] = v
	}
	return binary, args, env, nil
}

// watch kills p once the kernel fails, and fails the kernel with how p
// ended once it ends (closing pr, its stdin's reader).
func (k *Kernel) watch(p sandbox.Process, pr *io.PipeReader) {
	go func() {
		// fail may run on the backend's output goroutine: the kill is
		// done here, where p is known.
		<-k.dead
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Signal(ctx, sandbox.SIGKILL)
	}()
	go func() {
		ex, err := p.Wait(context.Background())
		pr.Close()
		switch {
		case err != nil:
			k.fail(fmt.Errorf("the interpreter ended: %v", err))
		case ex.OOM:
			k.fail(errors.New("the interpreter was killed by the sandbox's memory limit"))
		case ex.TimedOut:
			k.fail(errors.New("the interpreter reached the sandbox's process time limit"))
		case ex.Signal != 0:
			k.fail(fmt.Errorf("the interpreter was killed by signal %d", ex.Signal))
		default:
			k.fail(fmt.Errorf("the interpreter exited with code %d", ex.Code))
		}
	}()
}

// awaitReady waits for the kernel's ready message; on anything else it
// fails the kernel (which kills its process) and says why.
func (k *Kernel) awaitReady(ctx context.Context) (*Kernel, error) {
	o := k.opts
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case m := <-k.msgs:
		if m.Type != "ready" {
			k.fail(fmt.Errorf("sent %q before ready", m.Type))
			return nil, fmt.Errorf("start %s interpreter: it broke the protocol: %w", o.Language, sandbox.ErrUnavailable)
		}
		k.version = clipString(m.Version, 64)
		k.listening.Store(false)
		return k, nil
	case <-k.dead:
		tailText := strings.TrimSpace(k.stderr.String())
		if o.Language == JavaScript && (strings.Contains(tailText, "node: not found") || strings.Contains(tailText, "node: No such file")) {
			return nil, fmt.Errorf("start %s interpreter: node is not installed in this sandbox: %w", o.Language, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("start %s interpreter: %v: %s: %w", o.Language, k.deadErr, clipString(tailText, 1024), sandbox.ErrUnavailable)
	case <-timer.C:
		k.fail(errors.New("not ready in time"))
		return nil, fmt.Errorf("start %s interpreter: not ready within %s: %w", o.Language, o.StartTimeout, sandbox.ErrTimeout)
	case <-ctx.Done():
		k.fail(ctx.Err())
		return nil, fmt.Errorf("start %s interpreter: %w", o.Language, ctx.Err())
	}
}

// Language is the kernel's language; Version its interpreter's version.
func (k *Kernel) Language() string { return k.lang }
func (k *Kernel) Version() string  { return k.version }

// Done is closed once the kernel is unusable (exited, killed, broke the
// protocol, or closed).
func (k *Kernel) Done() <-chan struct{} { return k.dead }

// Close kills the kernel. Idempotent.
func (k *Kernel) Close() { k.fail(errors.New("closed")) }

// fail marks the kernel unusable; a goroutine of Start then kills its
// process.
func (k *Kernel) fail(err error) {
	k.failOnce.Do(func() {
		k.deadErr = err
		close(k.dead)
		k.stdin.CloseWithError(sandbox.ErrClosed)
	})
}

// Run runs code as the next cell and waits for its answer, at most timeout
// (then the cell is interrupted; if it does not stop within the grace
// period the kernel is killed). The cell's own failures, a timeout and the
// kernel's death are Results with Error set; an error return means the
// cell was not run to an answer: ctx ended, or the kernel was already
// unusable (sandbox.ErrClosed: start a new one).
func (k *Kernel) Run(ctx context.Context, code string, timeout time.Duration) (*Result, error) {
	return k.run(ctx, code, timeout, CellOptions{})
}

// RunStream is Run with the cell's output handed to onOutput as it comes
// (name "stdout" or "stderr"; called from one goroutine, in order) rather
// than in the Result, whose Data and Displays carry every representation
// of what the cell showed. onOutput must not block for long: the kernel
// waits for it.
func (k *Kernel) RunStream(ctx context.Context, code string, timeout time.Duration, onOutput func(name, text string)) (*Result, error) {
	return k.run(ctx, code, timeout, CellOptions{OnOutput: onOutput})
}

// CellOptions are the settings of one cell (RunWith).
type CellOptions struct {
	// Env is set in the interpreter's environment for this cell only
	// (Python's os.environ, node's process.env, bash's exported
	// variables; what the cell starts inherits it) and put back as it
	// was once the cell ends, interrupted or not. Names are shell
	// identifiers (CheckEnv).
	Env map[string]string
	// OnOutput, when set, streams the cell's output as RunStream does.
	OnOutput func(name, text string)
}

// RunWith is Run with the settings of o. A bad o.Env is an error wrapping
// sandbox.ErrInvalid, before anything runs.
func (k *Kernel) RunWith(ctx context.Context, code string, timeout time.Duration, o CellOptions) (*Result, error) {
	if err := CheckEnv(o.Env); err != nil {
		return nil, err
	}
	return k.run(ctx, code, timeout, o)
}

// CheckEnv checks the names and values of a cell's environment: names are
// shell identifiers (bash must be able to export them), values hold no
// NUL byte.
func CheckEnv(env map[string]string) error {
	for name, v := range env {
		if !policy.ValidEnvName(name) {
			return fmt.Errorf("cell environment: %q is not a variable name: %w", clipString(name, 64), sandbox.ErrInvalid)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("cell environment: the value of %s holds a NUL byte: %w", name, sandbox.ErrInvalid)
		}
	}
	return nil
}

func (k *Kernel) run(ctx context.Context, code string, timeout time.Duration, o CellOptions) (*Result, error) {
	onOutput := o.OnOutput
	select {
	case k.sem <- struct{}{}:
		defer func() { <-k.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-k.dead:
		return nil, fmt.Errorf("run cell: interpreter gone (%v): %w", k.deadErr, sandbox.ErrClosed)
	}
	select {
	case <-k.dead:
		return nil, fmt.Errorf("run cell: interpreter gone (%v): %w", k.deadErr, sandbox.ErrClosed)
	default:
	}
	k.nextID++
	id := k.nextID
	line, err := json.Marshal(struct {
		ID     int64             `json:"id"`
		Code   string            `json:"code"`
		Stream bool              `json:"stream,omitempty"`
		Env    map[string]string `json:"env,omitempty"`
	}{id, code, onOutput != nil, o.Env})
	if err != nil {
		return nil, fmt.Errorf("run cell: %w", err)
	}
	line = append(line, '\n')
	if onOutput != nil {
		k.onStream.Store(&onOutput)
		defer k.onStream.Store(nil)
	}
	k.listening.Store(true)
	defer k.listening.Store(false)
	go func() {
		// Blocks while the kernel does not read; ends when it dies.
		if _, err := k.stdin.Write(line); err != nil {
			k.fail(fmt.Errorf("write request: %v", err))
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case m := <-k.msgs:
		return k.answer(m, id), nil
	case <-k.dead:
		return k.died(), nil
	case <-timer.C:
		r := k.interrupt(id)
		if r.Error != nil && !r.Lost {
			r.Error = &CellError{Name: ErrNameTimeout, Traceback: r.Error.Traceback,
				Value: fmt.Sprintf("the cell ran longer than %s and was interrupted; the interpreter's state is kept", timeout)}
		} else if r.Lost {
			r.Error = &CellError{Name: ErrNameTimeout,
				Value: fmt.Sprintf("the cell ran longer than %s and did not stop when interrupted; the interpreter was restarted and its state is lost", timeout)}
		}
		return r, nil
	case <-ctx.Done():
		k.interrupt(id)
		return nil, ctx.Err()
	}
}

// interrupt sends SIGINT and waits for the cell's answer for the grace
// period; then the kernel is killed.
func (k *Kernel) interrupt(id int64) *Result {
	sctx, cancel := context.WithTimeout(context.Background(), k.opts.InterruptGrace)
	defer cancel()
	if err := k.proc.Signal(sctx, sandbox.SIGINT); err != nil {
		k.fail(fmt.Errorf("interrupt: %v", err))
		return k.died()
	}
	grace := time.NewTimer(k.opts.InterruptGrace)
	defer grace.Stop()
	select {
	case m := <-k.msgs:
		return k.answer(m, id)
	case <-k.dead:
		return k.died()
	case <-grace.C:
		k.fail(errors.New("the cell did not stop when interrupted"))
		return k.died()
	}
}

// answer checks that m answers request id; anything else kills the kernel.
func (k *Kernel) answer(m *message, id int64) *Result {
	if m.Type == "fatal" {
		k.fail(fmt.Errorf("the interpreter gave up: %s", clipString(m.Message, 256)))
		return k.died()
	}
	if m.Type != "result" || m.ID == nil || *m.ID != id {
		k.fail(errors.New("the interpreter sent an answer to a question not asked"))
		return k.died()
	}
	return m.toResult()
}

func (k *Kernel) died() *Result {
	<-k.dead
	msg := fmt.Sprintf("%v; its state is lost, the next call starts a new interpreter", k.deadErr)
	if t := strings.TrimSpace(k.stderr.String()); t != "" {
		msg += "\ninterpreter stderr (tail):\n" + t
	}
	return &Result{Error: &CellError{Name: ErrNameDied, Value: msg}, Lost: true}
}

// deliver hands a parsed message to the waiting caller; an unasked-for
// message (nobody waiting, one already pending) breaks the protocol.
func (k *Kernel) deliver(m *message) {
	if m.Type == "stream" {
		fn := k.onStream.Load()
		if fn == nil {
			k.fail(errors.New("the interpreter streamed output nobody asked for"))
			return
		}
		(*fn)(m.Name, strings.ToValidUTF8(m.Text, "\uFFFD"))
		return
	}
	select {
	case k.msgs <- m:
	default:
		k.fail(errors.New("the interpreter sent a message nobody asked for"))
	}
}

// lineWriter splits the kernel's stdout into bounded lines and parses them.
type lineWriter struct {
	k      *Kernel
	max    int
	buf    []byte
	broken bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.broken && !w.k.listening.Load() && len(p) > 0 {
		w.breakWith(errors.New("it wrote while no answer was due"))
	}
	for len(p) > 0 && !w.broken {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.buf)+len(p) > w.max {
				w.breakWith(fmt.Errorf("a message larger than %d bytes", w.max))
				break
			}
			w.buf = append(w.buf, p...)
			break
		}
		if len(w.buf)+i > w.max {
			w.breakWith(fmt.Errorf("a message larger than %d bytes", w.max))
			break
		}
		line := append(w.buf, p[:i]...)
		w.buf = nil
		p = p[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMessage(line)
		if err != nil {
			w.breakWith(err)
			break
		}
		w.k.deliver(m)
	}
	// Never block or fail the backend's copy: after a break the rest is
	// discarded while the kernel is being killed.
	return n, nil
}

func (w *lineWriter) breakWith(err error) {
	w.broken, w.buf = true, nil
	w.k.fail(fmt.Errorf("the interpreter broke the protocol: %v", err))
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.b), "\uFFFD")
}

func clipString(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
