package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// killGrace is how long the host waits, without any frame from the guest,
// for an exit report after the process should have died (timeout, output
// limit) before it gives up on the process.
const killGrace = 5 * time.Second

// Exec starts a process in the guest. It returns once the process runs or
// failed to start (ErrNotFound: no such command; ErrPermission: cannot be
// executed). ctx bounds the start only; Wait takes its own context. The
// streams in req are copied until the process ends; Wait does not wait for
// a Stdin reader that never returns.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	name := ""
	if len(req.Args) > 0 {
		name = req.Args[0]
	}
	op := fmt.Sprintf("exec %q", truncate(name, 256))
	timeout := req.Timeout
	if timeout == 0 {
		timeout = c.defaultTimeout()
	}
	er := &execRequest{
		Args:    req.Args,
		User:    req.User,
		Dir:     req.Dir,
		Stdin:   req.Stdin != nil,
		Stdout:  req.Stdout != nil,
		Stderr:  req.Stderr != nil && !req.TTY,
		TTY:     req.TTY,
		Rows:    req.Rows,
		Cols:    req.Cols,
		Timeout: int64(timeout),
	}
	if len(req.Env) > 0 {
		keys := make([]string, 0, len(req.Env))
		for k := range req.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("%s: bad environment variable name %q: %w", op, k, sandbox.ErrInvalid)
			}
			er.Env = append(er.Env, k+"="+req.Env[k])
		}
	}
	if err := checkExec(er); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	st, resp, err := c.roundTrip(ctx, op, &request{Op: opExec, Exec: er})
	if err != nil {
		return nil, err
	}
	p := &process{
		c:       c,
		st:      st,
		op:      op,
		pid:     resp.PID,
		tty:     req.TTY,
		stdout:  req.Stdout,
		stderr:  req.Stderr,
		limit:   c.opts.OutputLimit,
		done:    make(chan struct{}),
		credit:  make(chan struct{}, 1),
		timeout: timeout,
	}
	p.touch()
	c.emit(audit.TypeExec, "", map[string]any{"args": req.Args, "pid": p.pid, "tty": req.TTY})
	if timeout > 0 {
		p.armBackstop(timeout+killGrace, fmt.Errorf("%s: no exit reported after the %v timeout: %w", op, timeout, sandbox.ErrTimeout))
	}
	go p.readLoop()
	if req.Stdin != nil {
		go p.pumpStdin(req.Stdin)
	}
	return p, nil
}

// process is the host's handle on one guest process.
type process struct {
	c       *Client
	st      *yamux.Stream
	op      string
	pid     int
	tty     bool
	stdout  io.Writer
	stderr  io.Writer
	limit   int64
	timeout time.Duration

	wmu sync.Mutex // serialises frame writes to st

	// output accounting, touched only by readLoop
	copied    int64
	truncated bool
	limitHit  atomic.Bool

	lastFrame atomic.Int64 // unix nanos of the last sign of life
	inWrite   atomic.Bool  // copying to the caller's writer: the guest is not to blame

	stdinMu     sync.Mutex
	inflight    int // stdin bytes sent, not yet credited
	stdinClosed bool
	credit      chan struct{}

	abandonMu  sync.Mutex
	abandonErr error

	once   sync.Once
	done   chan struct{}
	status sandbox.ExitStatus
	err    error
}

func (p *process) PID() int { return p.pid }

// Wait blocks until the process ended and its output was copied, or ctx
// ends (the process keeps running then; Wait may be called again).
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return sandbox.ExitStatus{}, fmt.Errorf("%s: wait: %w", p.op, ctx.Err())
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal delivers sig to the process (not its group).
func (p *process) Signal(ctx context.Context, sig int) error {
	if sig <= 0 || sig > 64 {
		return fmt.Errorf("%s: signal %d: %w", p.op, sig, sandbox.ErrInvalid)
	}
	return p.control(ctx, "signal", frameSignal, []byte{byte(sig), 0})
}

// Kill sends SIGKILL to the process's group (the guest starts each
// process as the leader of its own session and group), so its
// descendants end with it. Nil once the process has exited.
func (p *process) Kill(ctx context.Context) error {
	if err := p.control(ctx, "kill", frameSignal, []byte{sandbox.SIGKILL, 1}); err != nil && !p.exited() {
		return err
	}
	return nil
}

// Resize changes the PTY window size; ErrInvalid without a TTY.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if !p.tty {
		return fmt.Errorf("%s: resize: no terminal: %w", p.op, sandbox.ErrInvalid)
	}
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:], rows)
	binary.BigEndian.PutUint16(b[2:], cols)
	return p.control(ctx, "resize", frameResize, b[:])
}

// control writes one control frame, in the caller's goroutine: ctx ending
// during the write interrupts it through a write deadline. The frame may
// then be cut short, so the stream is abandoned (the guest takes that as
// the host giving up and kills the process group).
func (p *process) control(ctx context.Context, what string, typ byte, payload []byte) error {
	exited := func() error {
		return fmt.Errorf("%s: %s: process has exited: %w", p.op, what, sandbox.ErrNotFound)
	}
	if p.exited() {
		return exited()
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", p.op, what, err)
	}
	stop := context.AfterFunc(ctx, func() { p.st.SetWriteDeadline(time.Unix(1, 0)) })
	err := writeFrame(p.st, typ, payload)
	if !stop() {
		p.st.SetWriteDeadline(time.Time{})
		if err != nil {
			p.st.Close()
			return fmt.Errorf("%s: %s: %w", p.op, what, ctx.Err())
		}
	}
	if err != nil {
		if p.exited() {
			return exited()
		}
		return p.c.wrapErr(ctx, p.op+": "+what, err)
	}
	return nil
}

func (p *process) writeFrame(typ byte, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return writeFrame(p.st, typ, payload)
}

// closeStdinTimeout bounds CloseStdin, which has no context, against a
// guest that stopped reading.
const closeStdinTimeout = 10 * time.Second

// CloseStdin ends the process's input. Idempotent.
func (p *process) CloseStdin() error {
	p.stdinMu.Lock()
	if p.stdinClosed {
		p.stdinMu.Unlock()
		return nil
	}
	p.stdinClosed = true
	p.stdinMu.Unlock()
	p.signalCredit()
	if p.exited() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeStdinTimeout)
	defer cancel()
	if err := p.control(ctx, "close stdin", frameStdinClose, nil); err != nil && !p.exited() {
		return err
	}
	return nil
}

func (p *process) signalCredit() {
	select {
	case p.credit <- struct{}{}:
	default:
	}
}

// pumpStdin copies r to the guest without ever having more than
// stdinWindow bytes unacknowledged, so the guest never buffers more.
func (p *process) pumpStdin(r io.Reader) {
	buf := make([]byte, chunkSize)
	for {
		// Wait for room in the window.
		var room int
		for {
			p.stdinMu.Lock()
			closed := p.stdinClosed
			room = stdinWindow - p.inflight
			p.stdinMu.Unlock()
			if closed {
				return
			}
			if room > 0 {
				break
			}
			select {
			case <-p.credit:
			case <-p.done:
				return
			}
		}
		n, rerr := r.Read(buf[:min(room, len(buf))])
		if n > 0 {
			p.stdinMu.Lock()
			closed := p.stdinClosed
			p.inflight += n
			p.stdinMu.Unlock()
			if closed || p.exited() {
				return
			}
			if err := p.writeFrame(frameStdin, buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			p.CloseStdin()
			return
		}
	}
}

// readLoop reads the guest's frames until the exit report.
func (p *process) readLoop() {
	fr := newFrameReader(p.st, MaxFramePayload)
	for {
		typ, payload, err := fr.next()
		if err != nil {
			p.abandonMu.Lock()
			aerr := p.abandonErr
			p.abandonMu.Unlock()
			if aerr != nil {
				p.finish(sandbox.ExitStatus{Code: 128 + sandbox.SIGKILL, Signal: sandbox.SIGKILL,
					TimedOut: errors.Is(aerr, sandbox.ErrTimeout), Truncated: p.truncated}, aerr)
				return
			}
			p.finish(sandbox.ExitStatus{}, p.c.wrapErr(context.Background(), p.op+": wait", err))
			return
		}
		p.touch()
		switch typ {
		case frameStdout:
			p.output(p.stdout, payload)
		case frameStderr:
			p.output(p.stderr, payload)
		case frameCredit:
			if len(payload) != 4 {
				p.protocolError("bad credit frame")
				return
			}
			n := int(binary.BigEndian.Uint32(payload))
			p.stdinMu.Lock()
			if n > p.inflight {
				p.stdinMu.Unlock()
				p.protocolError("credit for more stdin than sent")
				return
			}
			p.inflight -= n
			p.stdinMu.Unlock()
			p.signalCredit()
		case frameExit:
			var ef exitFrame
			if err := json.Unmarshal(payload, &ef); err != nil || ef.Code < 0 || ef.Code > 255 || ef.Signal < 0 || ef.Signal > 64 {
				p.protocolError("bad exit frame")
				return
			}
			st := sandbox.ExitStatus{Code: ef.Code, Signal: ef.Signal, TimedOut: ef.TimedOut, Truncated: p.truncated}
			p.finish(st, nil)
			return
		case frameError:
			var we wireError
			if err := json.Unmarshal(payload, &we); err != nil {
				p.protocolError("bad error frame")
				return
			}
			p.finish(sandbox.ExitStatus{}, fmt.Errorf("%s: %w", p.op, fromWire(&we)))
			return
		default:
			p.protocolError(fmt.Sprintf("unexpected frame type %q", typ))
			return
		}
	}
}

func (p *process) protocolError(msg string) {
	err := fmt.Errorf("%s: %s: %w", p.op, msg, errProtocol)
	p.finish(sandbox.ExitStatus{}, p.c.wrapErr(context.Background(), p.op, err))
}

// output copies guest output to w, enforcing the output limit.
func (p *process) output(w io.Writer, b []byte) {
	if p.limit > 0 {
		left := p.limit - p.copied
		if left <= 0 {
			if len(b) > 0 { // output beyond an exactly-filled limit
				p.truncated = true
				p.truncate()
			}
			return
		}
		if int64(len(b)) > left {
			b = b[:left]
			p.truncated = true
		}
	}
	p.copied += int64(len(b))
	if w != nil {
		p.inWrite.Store(true)
		_, err := w.Write(b)
		p.inWrite.Store(false)
		if err != nil {
			// The caller's writer failed: drop the rest of this stream.
			if w == p.stdout {
				p.stdout = nil
			} else {
				p.stderr = nil
			}
		}
		p.touch()
	}
	if p.truncated {
		p.truncate()
	}
}

// truncate kills the process once the output limit was hit.
func (p *process) truncate() {
	if !p.limitHit.CompareAndSwap(false, true) {
		return
	}
	p.c.emit(audit.TypeLimit, "output limit", map[string]any{"pid": p.pid, "limit_bytes": p.limit})
	go p.writeFrame(frameSignal, []byte{sandbox.SIGKILL, 1})
	p.armBackstop(killGrace, fmt.Errorf("%s: no exit reported after killing at the output limit: %w", p.op, sandbox.ErrLimit))
}

func (p *process) touch() { p.lastFrame.Store(time.Now().UnixNano()) }

// armBackstop gives up on the process when, after d, no frame arrived for
// killGrace: a guest that stops reporting must not hang Wait forever.
func (p *process) armBackstop(d time.Duration, err error) {
	var check func()
	check = func() {
		if p.exited() {
			return
		}
		idle := time.Since(time.Unix(0, p.lastFrame.Load()))
		if p.inWrite.Load() {
			idle = 0
		}
		if idle < killGrace {
			time.AfterFunc(killGrace-idle, check)
			return
		}
		p.abandonMu.Lock()
		if p.abandonErr == nil {
			p.abandonErr = err
		}
		p.abandonMu.Unlock()
		p.st.SetReadDeadline(time.Unix(1, 0))
	}
	time.AfterFunc(d, check)
}

func (p *process) finish(st sandbox.ExitStatus, err error) {
	p.once.Do(func() {
		p.status, p.err = st, err
		close(p.done)
		p.st.Close()
		f := map[string]any{"pid": p.pid, "exit_code": st.Code}
		if st.Signal != 0 {
			f["signal"] = st.Signal
		}
		if st.TimedOut {
			f["timed_out"] = true
			p.c.emit(audit.TypeLimit, "timeout", map[string]any{"pid": p.pid, "timeout": p.timeout.String()})
		}
		if st.Truncated {
			f["output_truncated"] = true
		}
		if err != nil {
			f["error"] = err.Error()
		}
		p.c.emit(audit.TypeExit, "", f)
	})
}
