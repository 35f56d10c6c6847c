package agent

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlock-dev/airlock/sandbox"
)

// Draining output after the process exited. The kernel closes a process's
// descriptors before its parent learns of the exit, so normally the pipes
// are at EOF by then. A descendant that still holds them (a daemon started
// in the background) must not block the exit report forever: after the exit
// each read gets drainIdle to return, and at most drainMax further bytes are
// read (more than any pipe or pty buffer holds, so only such a descendant
// can produce them). Output that descendant writes later is lost.
const (
	drainIdle = 100 * time.Millisecond
	drainMax  = 4 << 20
)

// guestProc is one process started for the host.
type guestProc struct {
	pid      int
	tty      bool
	st       *yamux.Stream
	wmu      sync.Mutex
	exited   atomic.Bool
	timedOut atomic.Bool

	outputs []*os.File // stdout/stderr pipes or the pty master
	child   []*os.File // the child's ends, closed once it was started

	stdin      *os.File // pipe write end or pty master; nil when closed
	stdinMu    sync.Mutex
	stdinQ     [][]byte
	stdinQLen  int
	stdinEOF   bool
	stdinWake  chan struct{}
	stdinDone  chan struct{}
	hostBroken atomic.Bool
}

// exec serves one exec stream: start the process, answer with its pid,
// stream its input and output, report its exit.
func (g *guest) exec(st *yamux.Stream, req *request, cfg *GuestConfig) {
	er := req.Exec
	if er == nil {
		respondErr(st, fmt.Errorf("exec without request: %w", sandbox.ErrInvalid))
		return
	}
	if err := checkExec(er); err != nil {
		respondErr(st, err)
		return
	}
	env := mergeEnv(cfg.Env, er.Env)
	dir := er.Dir
	if dir == "" {
		dir = cfg.Workdir
	}
	if dir == "" {
		dir = "/"
	}
	if fi, err := os.Stat(dir); err != nil {
		respondErr(st, fmt.Errorf("working directory %q: %w", dir, errnoKind(err)))
		return
	} else if !fi.IsDir() {
		respondErr(st, fmt.Errorf("working directory %q is not a directory: %w", dir, sandbox.ErrNotFound))
		return
	}
	pathEnv, set := envValue(env, "PATH")
	argv0, err := lookPath(er.Args[0], pathEnv, set, dir)
	if err != nil {
		respondErr(st, err)
		return
	}

	p := &guestProc{st: st, tty: er.TTY, stdinWake: make(chan struct{}, 1), stdinDone: make(chan struct{})}
	stdio, err := p.openStdio(er)
	if err != nil {
		respondErr(st, err)
		return
	}
	sys := &syscall.SysProcAttr{Setsid: true, Setctty: er.TTY, Ctty: 0}
	sys.Credential = g.credential(cfg)
	if g.cgroup != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, int(g.cgroup.Fd())
	}
	if er.User != "" {
		cred, err := g.userCredential(er.User, sys.Credential)
		if err != nil {
			respondErr(st, err)
			return
		}
		sys.Credential = cred
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: stdio[:], Sys: sys}

	var wait <-chan syscall.WaitStatus
	g.mu.Lock()
	if g.closed {
		err = fmt.Errorf("agent is shutting down: %w", sandbox.ErrClosed)
	} else if p.pid, wait, err = spawn(argv0, er.Args, attr); err != nil {
		err = fmt.Errorf("start %q: %w", er.Args[0], commandKind(errnoKind(err)))
	} else {
		g.procs[p] = struct{}{}
	}
	g.mu.Unlock()
	closeFiles(p.child)
	if err != nil {
		p.closeStdio()
		respondErr(st, err)
		return
	}
	if respond(st, &response{PID: p.pid}) != nil {
		killChild(p.pid, syscall.SIGKILL, true, nil)
	}
	p.run(er, wait)
	g.mu.Lock()
	delete(g.procs, p)
	g.mu.Unlock()
}

// credential is the identity processes run as (nil: the agent's).
func (g *guest) credential(cfg *GuestConfig) *syscall.Credential {
	if cfg.UID < 0 && cfg.GID < 0 {
		return nil
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if cfg.UID >= 0 {
		uid = uint32(cfg.UID)
	}
	if cfg.GID >= 0 {
		gid = uint32(cfg.GID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: g.noSetgroups}
}

// openStdio makes the process's standard descriptors: a pty, or three pipes.
func (p *guestProc) openStdio(er *execRequest) ([3]uintptr, error) {
	if er.TTY {
		master, slave, err := openPTY()
		if err != nil {
			return [3]uintptr{}, fmt.Errorf("allocate terminal: %v: %w", err, sandbox.ErrUnavailable)
		}
		rows, cols := er.Rows, er.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80 // a 0x0 terminal confuses programs
		}
		setWinsize(master, rows, cols)
		p.child = []*os.File{slave}
		p.outputs = []*os.File{master}
		p.stdin = master
		fd := slave.Fd()
		return [3]uintptr{fd, fd, fd}, nil
	}
	var ends [3][2]*os.File // [stdin, stdout, stderr][read, write]
	for i := range ends {
		r, w, err := pipe(i > 0)
		if err != nil {
			for _, e := range ends[:i] {
				closeFiles(e[:])
			}
			return [3]uintptr{}, fmt.Errorf("create pipes: %v: %w", err, sandbox.ErrLimit)
		}
		ends[i] = [2]*os.File{r, w}
	}
	p.child = []*os.File{ends[0][0], ends[1][1], ends[2][1]}
	p.outputs = []*os.File{ends[1][0], ends[2][0]}
	p.stdin = ends[0][1]
	if !er.Stdin {
		p.stdin.Close()
		p.stdin = nil
	}
	return [3]uintptr{ends[0][0].Fd(), ends[1][1].Fd(), ends[2][1].Fd()}, nil
}

// closeStdio closes the agent's ends.
func (p *guestProc) closeStdio() {
	closeFiles(p.outputs)
	if p.stdin != nil && !p.tty {
		p.stdin.Close()
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// run streams a started process until it exited and its output is
// drained, then reports the exit.
func (p *guestProc) run(er *execRequest, wait <-chan syscall.WaitStatus) {
	var timer *time.Timer
	if t := durationFromNS(er.Timeout); t > 0 {
		timer = time.AfterFunc(t, func() {
			// Marked under the reaper's lock, so only if the kill hit the
			// process and before its exit status is dispatched.
			killChild(p.pid, syscall.SIGKILL, true, func() { p.timedOut.Store(true) })
		})
	}
	var readers sync.WaitGroup
	for i, f := range p.outputs {
		typ, want := frameStdout, er.Stdout
		if i == 1 {
			typ, want = frameStderr, er.Stderr
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			p.copyOutput(f, typ, want)
		}()
	}
	if p.stdin != nil {
		go p.writeStdin()
	} else {
		close(p.stdinDone)
	}
	go p.readHost()

	ws := <-wait
	if timer != nil {
		timer.Stop()
	}
	p.exited.Store(true)
	for _, f := range p.outputs {
		f.SetReadDeadline(time.Now().Add(drainIdle))
	}
	readers.Wait()
	// Output is drained: stop feeding input, also when a descendant holds
	// the input open without reading it.
	if p.stdin != nil {
		p.stdin.SetWriteDeadline(time.Now())
	}
	p.stdinMu.Lock()
	p.stdinEOF = true
	p.stdinMu.Unlock()
	p.wakeStdin()
	<-p.stdinDone
	p.closeStdio()

	ef := exitFrame{TimedOut: p.timedOut.Load()}
	switch {
	case ws.Exited():
		ef.Code = ws.ExitStatus()
	case ws.Signaled():
		ef.Signal = int(ws.Signal())
		ef.Code = 128 + ef.Signal
	}
	p.send(frameExit, mustJSON(ef))
}
