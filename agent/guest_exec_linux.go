package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

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

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// guestProc is one process started for the host.
type guestProc struct {
	pid      int
	tty      bool
	st       *yamux.Stream
	wmu      sync.Mutex
	exited   atomic.Bool
	timedOut atomic.Bool

	outputs []*os.File // stdout/stderr pipes or the pty master

	stdin      *os.File // pipe write end or pty master; nil when closed
	stdinMu    sync.Mutex
	stdinQ     [][]byte
	stdinQLen  int
	stdinEOF   bool
	stdinWake  chan struct{}
	stdinDone  chan struct{}
	hostBroken atomic.Bool
}

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
	var childFiles []*os.File // closed in the parent after the fork
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	var stdio [3]uintptr
	if er.TTY {
		master, slave, err := openPTY()
		if err != nil {
			respondErr(st, fmt.Errorf("allocate terminal: %v: %w", err, sandbox.ErrUnavailable))
			return
		}
		rows, cols := er.Rows, er.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80 // a 0x0 terminal confuses programs
		}
		setWinsize(master, rows, cols)
		childFiles = []*os.File{slave}
		p.outputs = []*os.File{master}
		p.stdin = master
		stdio = [3]uintptr{slave.Fd(), slave.Fd(), slave.Fd()}
	} else {
		var parentEnds []*os.File
		fail := func(err error) {
			closeAll(childFiles)
			closeAll(parentEnds)
			respondErr(st, fmt.Errorf("create pipes: %v: %w", err, sandbox.ErrLimit))
		}
		inR, inW, err := pipe(false)
		if err != nil {
			fail(err)
			return
		}
		childFiles, parentEnds = append(childFiles, inR), append(parentEnds, inW)
		outR, outW, err := pipe(true)
		if err != nil {
			fail(err)
			return
		}
		childFiles, parentEnds = append(childFiles, outW), append(parentEnds, outR)
		errR, errW, err := pipe(true)
		if err != nil {
			fail(err)
			return
		}
		childFiles, parentEnds = append(childFiles, errW), append(parentEnds, errR)
		stdio = [3]uintptr{inR.Fd(), outW.Fd(), errW.Fd()}
		p.stdin = inW
		p.outputs = []*os.File{outR, errR}
		if !er.Stdin {
			inW.Close()
			p.stdin = nil
		}
	}

	sys := &syscall.SysProcAttr{Setsid: true}
	if er.TTY {
		sys.Setctty = true
		sys.Ctty = 0
	}
	if cfg.UID >= 0 || cfg.GID >= 0 {
		uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
		if cfg.UID >= 0 {
			uid = uint32(cfg.UID)
		}
		if cfg.GID >= 0 {
			gid = uint32(cfg.GID)
		}
		g.mu.Lock()
		nsg := g.noSetgroups
		g.mu.Unlock()
		sys.Credential = &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: nsg}
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: stdio[:], Sys: sys}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		closeAll(childFiles)
		closeAll(p.outputs)
		if p.stdin != nil && !er.TTY {
			p.stdin.Close()
		}
		respondErr(st, fmt.Errorf("agent is shutting down: %w", sandbox.ErrClosed))
		return
	}
	pid, wait, err := spawn(argv0, er.Args, attr)
	if err == nil {
		p.pid = pid
		g.procs[p] = struct{}{}
	}
	g.mu.Unlock()
	closeAll(childFiles)
	if err != nil {
		closeAll(p.outputs)
		if p.stdin != nil && !er.TTY {
			p.stdin.Close()
		}
		respondErr(st, fmt.Errorf("start %q: %w", er.Args[0], errnoKind(err)))
		return
	}
	defer func() {
		g.mu.Lock()
		delete(g.procs, p)
		g.mu.Unlock()
	}()

	if err := respond(st, &response{PID: pid}); err != nil {
		killChild(pid, syscall.SIGKILL, true)
	}

	var timer *time.Timer
	if t := durationFromNS(er.Timeout); t > 0 {
		timer = time.AfterFunc(t, func() {
			p.timedOut.Store(true)
			killChild(pid, syscall.SIGKILL, true)
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
	for _, f := range p.outputs {
		f.Close()
	}
	if p.stdin != nil && !er.TTY {
		p.stdin.Close()
	}

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

// copyOutput forwards one output stream as frames (or drops it when the
// host did not ask for it), applying the drain rules after the exit.
func (p *guestProc) copyOutput(f *os.File, typ byte, want bool) {
	buf := make([]byte, chunkSize)
	after := 0
	for {
		if p.exited.Load() {
			f.SetReadDeadline(time.Now().Add(drainIdle))
		}
		n, err := f.Read(buf)
		if n > 0 {
			if p.exited.Load() {
				after += n
			}
			if want && !p.hostBroken.Load() {
				if p.send(typ, buf[:n]) != nil {
					p.hostBroken.Store(true)
				}
			}
			if after > drainMax {
				return
			}
		}
		if err != nil {
			// EOF, EIO (pty with no slave left), or the drain deadline.
			return
		}
	}
}

func (p *guestProc) send(typ byte, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return writeFrame(p.st, typ, payload)
}

func (p *guestProc) wakeStdin() {
	select {
	case p.stdinWake <- struct{}{}:
	default:
	}
}

// readHost handles the host's frames. It never blocks on the process:
// stdin data is queued (the host keeps at most stdinWindow bytes in flight)
// and written by writeStdin.
func (p *guestProc) readHost() {
	fr := newFrameReader(p.st, MaxFramePayload)
	for {
		typ, payload, err := fr.next()
		if err != nil {
			if !p.exited.Load() {
				// The host is gone or gave up on this process.
				p.hostBroken.Store(true)
				killChild(p.pid, syscall.SIGKILL, true)
			}
			p.stdinMu.Lock()
			p.stdinEOF = true
			p.stdinMu.Unlock()
			p.wakeStdin()
			return
		}
		switch typ {
		case frameStdin:
			p.stdinMu.Lock()
			if p.stdinQLen+len(payload) > stdinWindow+MaxFramePayload {
				p.stdinMu.Unlock()
				killChild(p.pid, syscall.SIGKILL, true)
				p.st.Close()
				return
			}
			p.stdinQ = append(p.stdinQ, append([]byte(nil), payload...))
			p.stdinQLen += len(payload)
			p.stdinMu.Unlock()
			p.wakeStdin()
		case frameStdinClose:
			p.stdinMu.Lock()
			p.stdinEOF = true
			p.stdinMu.Unlock()
			p.wakeStdin()
		case frameSignal:
			if len(payload) == 2 && payload[0] > 0 && payload[0] <= 64 {
				killChild(p.pid, syscall.Signal(payload[0]), payload[1] == 1)
			}
		case frameResize:
			if len(payload) == 4 && p.tty {
				if setWinsize(p.outputs[0], binary.BigEndian.Uint16(payload[0:]), binary.BigEndian.Uint16(payload[2:])) == nil {
					winchFallback(p.outputs[0], p.pid)
				}
			}
		}
	}
}

// writeStdin feeds queued input to the process and credits the host for
// every byte consumed (written, or dropped when the process closed its
// input).
func (p *guestProc) writeStdin() {
	defer close(p.stdinDone)
	broken := false
	for {
		p.stdinMu.Lock()
		var chunk []byte
		if len(p.stdinQ) > 0 {
			chunk = p.stdinQ[0]
			p.stdinQ[0] = nil
			p.stdinQ = p.stdinQ[1:]
			p.stdinQLen -= len(chunk)
		}
		eof := p.stdinEOF
		p.stdinMu.Unlock()
		if chunk == nil {
			if eof {
				if p.tty {
					if !p.exited.Load() {
						p.stdin.Write([]byte{4}) // ^D: end of input in canonical mode
					}
				} else {
					p.stdin.Close()
				}
				return
			}
			<-p.stdinWake
			continue
		}
		if !broken {
			if _, err := p.stdin.Write(chunk); err != nil {
				broken = true // the process closed its input; drop the rest
			}
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(len(chunk)))
		p.send(frameCredit, b[:])
	}
}

// pipe returns a close-on-exec pipe whose agent end (the read end when
// agentReads, else the write end) is non-blocking, so its reads and writes
// can have deadlines; the child's end stays blocking.
func pipe(agentReads bool) (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	if agentReads {
		unix.SetNonblock(fds[0], true)
	} else {
		unix.SetNonblock(fds[1], true)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// mergeEnv returns base with extra's entries added, later keys winning.
func mergeEnv(base, extra []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(extra))
	for _, list := range [][]string{base, extra} {
		for _, kv := range list {
			k := kv[:strings.IndexByte(kv, '=')]
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func envValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], key+"=") {
			return env[i][len(key)+1:], true
		}
	}
	return "", false
}

// lookPath finds the executable for name like execvp would with the
// process's PATH, relative names resolved against dir.
func lookPath(name, pathEnv string, set bool, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	if !set {
		pathEnv = defaultPath
	}
	var permErr error
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, sandbox.ErrPermission) && permErr == nil {
			permErr = fmt.Errorf("command %q: %w", name, err)
		}
	}
	if permErr != nil {
		return "", permErr
	}
	return "", fmt.Errorf("command %q not found in PATH: %w", name, sandbox.ErrNotFound)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return errnoKind(err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory: %w", p, sandbox.ErrPermission)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable: %w", p, sandbox.ErrPermission)
	}
	return nil
}
