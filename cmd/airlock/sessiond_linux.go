package main

// The session daemon: one per user and session key, holding a warm native
// sandbox and running each caller's command in it as an exec with the
// caller's own stdio, until the session is ended, idle too long, or its
// sandbox dies. Only the user who started it may attach (SO_PEERCRED on
// a socket in a 0700 directory of that user).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/cmd/airlock/internal/sessclient"
	"github.com/airlock-dev/airlock/sandbox"
)

const sessionDaemonCommand = "__session"

func init() {
	register(command{name: sessionDaemonCommand, short: "session daemon (internal)", hidden: true, run: runSessionDaemon})
}

// sessionDaemon is one running session.
type sessionDaemon struct {
	base   string
	sb     sandbox.Sandbox
	ln     *net.UnixListener
	idle   time.Duration
	mu     sync.Mutex
	active int
	timer  *time.Timer
	end    chan struct{}
	once   sync.Once
	// refusals hands what the sandbox refused to the commands running
	// when it happened.
	refusals *sessionRefusals
}

// sessionRefusals is the session sandbox's audit sink: every event goes on
// to the session's sink and to the denial log of each running command, so
// each command, as with `airlock run`, hears on its stderr what airlock
// refused while it ran and why (with commands at once, each hears all).
type sessionRefusals struct {
	next audit.Sink
	mu   sync.Mutex
	cmds map[*denialLog]bool
}

func (r *sessionRefusals) Emit(e audit.Event) {
	r.next.Emit(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range r.cmds {
		d.Emit(e)
	}
}

// watch gives a command its own denial log (live notices to live, nil
// for none) until the returned stop is called.
func (r *sessionRefusals) watch(live io.Writer) (*denialLog, func()) {
	d := newDenialLog(nil, live)
	r.mu.Lock()
	r.cmds[d] = true
	r.mu.Unlock()
	return d, func() {
		r.mu.Lock()
		delete(r.cmds, d)
		r.mu.Unlock()
	}
}

// runSessionDaemon is `airlock __session [run flags]`: fd 3 is the pipe
// to the starting caller, which hears "ok" once the socket serves, or why
// the sandbox could not start.
func runSessionDaemon(args []string) int {
	unix.CloseOnExec(3) // the sandbox's processes must not hold the caller's pipe open
	ready := os.NewFile(3, "ready")
	fail := func(err error) int {
		fmt.Fprintf(ready, "%v\n", err)
		ready.Close()
		return exitAirlock
	}
	var f runFlags
	fs := newFlagSet("run")
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return fail(err)
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	f.id = "session-" + newRunID()[4:]
	dir, err := sessionDir()
	if err != nil {
		return fail(err)
	}
	d := &sessionDaemon{base: filepath.Join(dir, sessionKey(args)), idle: f.sessionIdle, end: make(chan struct{})}
	if d.idle <= 0 {
		d.idle = defaultSessionIdle
	}
	sb, refusals, closeAudit, err := startSessionSandbox(&f)
	if err != nil {
		return fail(err)
	}
	d.refusals = refusals
	defer closeAudit()
	d.sb = sb
	defer sb.Destroy(context.Background())
	d.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: d.base + ".sock", Net: "unix"})
	if err != nil {
		return fail(fmt.Errorf("session socket: %w", err))
	}
	d.ln.SetUnlinkOnClose(false)
	ready.WriteString("ok\n")
	ready.Close()
	d.timer = time.AfterFunc(d.idle, d.stop)
	go func() {
		select {
		case <-sb.Done():
		case <-d.end:
		}
		d.stop()
	}()
	d.serve()
	d.cleanup()
	return 0
}

// startSessionSandbox creates the session's sandbox under the run's
// policy and flags, as `airlock run` would for one command.
func startSessionSandbox(f *runFlags) (sandbox.Sandbox, *sessionRefusals, func() error, error) {
	pol, err := f.policy()
	if err != nil {
		return nil, nil, nil, err
	}
	if f.root != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", errSessionImage, sandbox.ErrInvalid)
	}
	log := newLogger()
	sink, closeAudit, err := openAudit(pol.Audit.File)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := openPolicyBackend(pol.Backend, pol.Isolation, nil, log)
	if err != nil {
		closeAudit()
		return nil, nil, nil, err
	}
	refusals := &sessionRefusals{next: sink, cmds: map[*denialLog]bool{}}
	spec, _, err := f.spec(f.id, pol, &audit.Counter{Next: refusals}, log)
	if err != nil {
		closeAudit()
		return nil, nil, nil, err
	}
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		closeAudit()
		return nil, nil, nil, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, refusals, closeAudit, nil
}

func (d *sessionDaemon) stop() {
	d.once.Do(func() { d.ln.Close() })
}

// cleanup removes the session's files under its lock (so no caller starts
// a new daemon on files this one is removing) and ends the sandbox.
func (d *sessionDaemon) cleanup() {
	unlock, err := lockSession(d.base)
	removeSessionFiles(d.base)
	if err == nil {
		unlock()
	}
	_ = d.sb.Destroy(context.Background())
}

func (d *sessionDaemon) serve() {
	var wg sync.WaitGroup
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			break
		}
		d.mu.Lock()
		d.active++
		d.timer.Stop()
		d.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.handle(c)
			d.mu.Lock()
			if d.active--; d.active == 0 {
				d.timer.Reset(d.idle)
			}
			d.mu.Unlock()
		}()
	}
	_ = d.sb.Destroy(context.Background()) // ends commands still running
	wg.Wait()
}

// handle serves one caller: owner check, the request with its stdio, the
// exec, control frames until the exit, the reply.
func (d *sessionDaemon) handle(c *net.UnixConn) {
	defer c.Close()
	reply := func(code int, err error) {
		rep := sessionReply{Code: code}
		if err != nil {
			rep.Error = err.Error()
		}
		_, _ = c.Write(sessclient.FormatReply(rep))
	}
	if err := sessionConnOwner(c); err != nil {
		reply(exitAirlock, err)
		return
	}
	req, files, err := readSessionRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		reply(exitAirlock, err)
		return
	}
	if req.End {
		reply(0, nil)
		close(d.end)
		return
	}
	code, err := d.exec(c, req, files)
	reply(code, err)
}

// readSessionRequest reads the length-prefixed request and the three
// descriptors that came with it. Stdin is reopened as a file description
// of the daemon's own (a pipe or terminal) so that closing it when the
// command ends stops the read: a read left pending would take the
// caller's next input.
func readSessionRequest(c *net.UnixConn) (sessionRequest, []*os.File, error) {
	var req sessionRequest
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return req, nil, fmt.Errorf("read request: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for i := range msgs {
			if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	files := make([]*os.File, 0, 3)
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		files = append(files, os.NewFile(uintptr(fd), "stdio"))
	}
	if len(files) != 3 {
		return req, files, errNoFds
	}
	if n < 4 {
		return req, files, fmt.Errorf("read request: short message: %w", sandbox.ErrInvalid)
	}
	size := int(binary.BigEndian.Uint32(buf))
	if size > 1<<20 {
		return req, files, fmt.Errorf("read request: %d bytes: %w", size, sandbox.ErrLimit)
	}
	body := append([]byte(nil), buf[4:n]...)
	if len(body) < size {
		rest := make([]byte, size-len(body))
		if _, err := io.ReadFull(c, rest); err != nil {
			return req, files, fmt.Errorf("read request: %w", err)
		}
		body = append(body, rest...)
	}
	if err := json.Unmarshal(body[:size], &req); err != nil {
		return req, files, fmt.Errorf("read request: %w: %w", err, sandbox.ErrInvalid)
	}
	files[0] = ownStdin(files[0])
	return req, files, nil
}

// ownStdin reopens a pipe or terminal as a description of our own, non
// blocking (the caller's stays as it was); anything else is used as is.
func ownStdin(f *os.File) *os.File {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return f
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFCHR {
		return f
	}
	fd, err := unix.Open("/proc/self/fd/"+itoa(int(f.Fd())), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return f
	}
	f.Close()
	return os.NewFile(uintptr(fd), "stdin")
}

// exec runs the request's command with the caller's stdio and returns its
// exit code; control frames from the caller become signals and resizes,
// and the caller going away kills the command.
func (d *sessionDaemon) exec(c *net.UnixConn, req sessionRequest, files []*os.File) (int, error) {
	ctx := context.Background()
	er := sandbox.ExecRequest{Args: req.Args, Stdin: files[0], Stdout: files[1], Stderr: files[2], TTY: req.TTY, Rows: req.Rows, Cols: req.Cols}
	var live io.Writer = files[2]
	if req.TTY {
		er.Stderr, live = nil, nil // as run: no live notices on a terminal the command draws on
	}
	denials, unwatch := d.refusals.watch(live)
	defer func() {
		unwatch()
		if sum := denials.summary(); sum != "" {
			if req.TTY {
				sum = strings.ReplaceAll(sum, "\n", "\r\n") // the caller's terminal is still raw
			}
			_, _ = files[2].WriteString(sum)
		}
	}()
	p, err := d.sb.Exec(ctx, er)
	if err != nil {
		_, _ = files[2].WriteString(outsideViewHints(ctx, d.sb, req.Args))
		return execExitCode(err), err
	}
	go func() {
		var frame [5]byte
		for {
			if _, err := io.ReadFull(c, frame[:]); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					_ = p.Kill(ctx) // the caller is gone
				}
				return
			}
			v := binary.BigEndian.Uint32(frame[1:])
			switch frame[0] {
			case ctlSignal:
				if v > 0 && v <= 64 {
					_ = p.Signal(ctx, int(v))
				}
			case ctlResize:
				_ = p.Resize(ctx, uint16(v>>16), uint16(v))
			}
		}
	}()
	st, err := p.Wait(ctx)
	files[0].Close() // stop the stdin copy before the caller reads its terminal again
	if err != nil {
		return exitAirlock, err
	}
	if st.Code != 0 {
		_, _ = files[2].WriteString(outsideViewHints(ctx, d.sb, req.Args))
	}
	if st.TimedOut {
		return st.Code, errors.New("command killed at the wall-clock timeout")
	}
	if st.OOM {
		return st.Code, errors.New("command killed by the memory limit")
	}
	return st.Code, nil
}
