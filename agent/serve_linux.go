package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// Serve runs the guest side of the protocol over conn until the host closes
// it (then it returns nil) or ctx ends. It owns the process: it reaps every
// child of the process (one wait4(-1) loop), ignores the signals processes
// inside could use to kill it, and marks the process non-dumpable. Call it
// once, from the sandbox's init. When it returns, every process it started
// has been sent SIGKILL.
func Serve(ctx context.Context, conn io.ReadWriteCloser, opts ServeOptions) error {
	if conn == nil {
		return fmt.Errorf("agent serve: nil connection: %w", sandbox.ErrInvalid)
	}
	log := discardLogger(opts.Log).With("component", "agent")
	if err := setupProcess(log); err != nil {
		return fmt.Errorf("agent serve: %w", err)
	}
	if err := startSpawner(nil); err != nil {
		return fmt.Errorf("agent serve: spawn thread setup: %w", err)
	}
	if err := setCloexec(conn); err != nil {
		return fmt.Errorf("agent serve: channel close-on-exec: %w", err)
	}
	rootPath := opts.Root
	if rootPath == "" {
		rootPath = "/"
	}
	root, err := openRoot(rootPath)
	if err != nil {
		return fmt.Errorf("agent serve: open root %q: %w", rootPath, err)
	}
	defer root.close()
	sess, err := yamux.Server(conn, yamuxConfig(log, 256))
	if err != nil {
		return fmt.Errorf("agent serve: start session: %v: %w", err, sandbox.ErrInvalid)
	}
	g := &guest{sess: sess, log: log, root: root, procs: map[*guestProc]struct{}{}, configured: make(chan struct{}), cgroup: opts.ProcessCgroup}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			break
		}
		go g.handle(st)
	}
	g.shutdown()
	sess.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

var setupOnce struct {
	sync.Once
	err error
}

// setupProcess applies the process-wide protections once.
func setupProcess(log *slog.Logger) error {
	setupOnce.Do(func() {
		// Catch (and drop) the signals a process inside could send us. A
		// handler, not SIG_IGN: ignored dispositions would be inherited by
		// every process we start, handled ones are reset on exec. The Go
		// runtime would otherwise exit on SIGTERM/SIGINT/SIGHUP/SIGQUIT and on
		// SIGPIPE from a write to a closed stdout. Other catchable signals
		// (SIGUSR1, SIGUSR2, ...) the runtime already catches and drops
		// (os/signal: "caught but no action will be taken"); each Notify'd
		// signal costs a round trip to the runtime's signal thread (two
		// thread hand-offs, ~0.1 ms on a small VM with one P) at start.
		//
		// The fault signals too (SIGSEGV, SIGABRT, ...): the runtime
		// crashes on one that kill(2) sends unless it is Notify'd (a
		// real fault still panics: it is not delivered). Only SIGABRT
		// of them costs a round trip (the others have no _SigNotify).
		ch := make(chan os.Signal, 16)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
			syscall.SIGPIPE, syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE,
			syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGSTKFLT)
		go func() {
			for s := range ch {
				log.Debug("ignored signal", "signal", s.String())
			}
		}()
		// Not dumpable: same-uid processes cannot ptrace us or open
		// /proc/<agent>/mem, /fd, /environ.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			setupOnce.err = fmt.Errorf("set non-dumpable: %w", err)
			return
		}
		// Descriptors inherited without close-on-exec (from whoever started
		// us) must not reach the processes we start.
		cloexecInherited()
		if os.Getpid() != 1 {
			// Not init (tests, or a backend that keeps its own init): still
			// inherit and reap our processes' orphans.
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				log.Debug("cannot become child subreaper", "err", err)
			}
		}
		startReaper()
	})
	return setupOnce.err
}

// CloexecInherited marks every descriptor above stderr close-on-exec:
// what a process started by a caller it does not control (the agent as a
// container's init, the OCI runtime under a shim) calls first, so that no
// descriptor of the caller's reaches what it starts.
func CloexecInherited() { cloexecInherited() }

// cloexecInherited marks every descriptor above stderr close-on-exec.
func cloexecInherited() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// setCloexec keeps the channel from leaking into processes we start.
func setCloexec(conn io.ReadWriteCloser) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { unix.CloseOnExec(int(fd)) })
}

// guest is the state of one served session.
type guest struct {
	sess *yamux.Session
	log  *slog.Logger
	root *rootFS

	mu          sync.Mutex
	cfg         *GuestConfig
	configuring bool          // a hello is being applied
	configured  chan struct{} // closed once a hello has applied cfg
	noSetgroups bool
	procs       map[*guestProc]struct{}
	egress      net.Listener
	identify    atomic.Bool // name the program behind each egress connection
	dials       int         // dial streams open
	watches     int         // watch streams open
	closed      bool
	cgroup      *os.File // ServeOptions.ProcessCgroup
}

// hostHeaderTimeout bounds how long the host may take to send a header.
const hostHeaderTimeout = 30 * time.Second

func (g *guest) handle(st *yamux.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(hostHeaderTimeout))
	var req request
	if err := readHeader(st, &req, MaxRequestHeader); err != nil {
		g.log.Warn("bad request header", "err", err)
		return
	}
	st.SetReadDeadline(time.Time{})
	g.mu.Lock()
	cfg := g.cfg
	g.mu.Unlock()
	if req.Op != opHello && cfg == nil {
		// Pipelined behind the hello (or sent too early): nothing runs
		// before the configuration is applied; wait for it, bounded.
		cfg = g.awaitConfig()
	}
	if req.Op != opHello && cfg == nil {
		respondErr(st, fmt.Errorf("%s before hello: %w", truncate(req.Op, 32), sandbox.ErrInvalid))
		return
	}
	switch req.Op {
	case opHello:
		g.hello(st, &req)
	case opPing:
		respond(st, &response{})
	case opExec:
		g.exec(st, &req, cfg)
	case opDial:
		g.dial(st, &req)
	case opPrograms:
		g.identify.Store(req.Identify)
		respond(st, &response{})
	default:
		fileOp, ok := g.fileOps()[req.Op]
		if !ok {
			respondErr(st, fmt.Errorf("unknown operation %q: %w", truncate(req.Op, 32), sandbox.ErrNotSupported))
			return
		}
		// File operations run with the identity processes have.
		if err := g.asUser(func() { fileOp(st, &req) }); err != nil {
			respondErr(st, err)
		}
	}
}

// awaitConfig waits until a hello has applied the configuration (nil if
// none came within hostHeaderTimeout or the session ended).
func (g *guest) awaitConfig() *GuestConfig {
	t := time.NewTimer(hostHeaderTimeout)
	defer t.Stop()
	select {
	case <-g.configured:
	case <-t.C:
	case <-g.sess.CloseChan():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cfg
}

func (g *guest) fileOps() map[string]func(*yamux.Stream, *request) {
	return map[string]func(*yamux.Stream, *request){
		opRead:    g.readFile,
		opWrite:   g.writeFile,
		opStat:    g.stat,
		opList:    g.list,
		opMkdir:   g.mkdir,
		opRemove:  g.remove,
		opRename:  g.rename,
		opSetMeta: g.setMeta,
		opWatch:   g.watch,
	}
}

func respond(st io.Writer, r *response) error {
	return writeHeader(st, r, MaxResponseHeader)
}

func respondErr(st io.Writer, err error) error {
	we := toWire(err)
	if len(we.Msg) > maxErrorMsg {
		we.Msg = we.Msg[:maxErrorMsg]
	}
	return respond(st, &response{Error: we})
}

func (g *guest) hello(st *yamux.Stream, req *request) {
	if req.Config == nil {
		respondErr(st, fmt.Errorf("hello without config: %w", sandbox.ErrInvalid))
		return
	}
	cfg := *req.Config
	if err := cfg.validate(); err != nil {
		respondErr(st, err)
		return
	}
	if cfg.Workdir != "" {
		if fi, err := os.Stat(cfg.Workdir); err != nil {
			respondErr(st, fmt.Errorf("working directory %q: %w", cfg.Workdir, errnoKind(err)))
			return
		} else if !fi.IsDir() {
			respondErr(st, fmt.Errorf("working directory %q is not a directory: %w", cfg.Workdir, sandbox.ErrInvalid))
			return
		}
	}
	g.mu.Lock()
	if g.cfg != nil || g.configuring {
		g.mu.Unlock()
		respondErr(st, fmt.Errorf("hello: already configured: %w", sandbox.ErrInvalid))
		return
	}
	g.configuring = true // nothing runs with a half-applied config
	g.mu.Unlock()
	if cfg.NoClone3 {
		if err := refuseClone3(); err != nil {
			g.mu.Lock()
			g.configuring = false
			g.mu.Unlock()
			respondErr(st, err)
			return
		}
	}
	var ln net.Listener
	if cfg.EgressAddr != "" {
		var err error
		if ln, err = net.Listen("tcp", cfg.EgressAddr); err != nil {
			g.mu.Lock()
			g.configuring = false
			g.mu.Unlock()
			respondErr(st, fmt.Errorf("listen for egress on %s: %v: %w", cfg.EgressAddr, err, sandbox.ErrUnavailable))
			return
		}
	}
	noSetgroups := os.Geteuid() != 0 || setgroupsDenied()
	g.identify.Store(!cfg.SkipPrograms) // before the first connection is accepted
	g.mu.Lock()
	g.cfg, g.noSetgroups, g.configuring = &cfg, noSetgroups, false
	g.egress = ln
	closed := g.closed
	g.mu.Unlock()
	close(g.configured)
	if ln != nil {
		if closed {
			ln.Close()
		}
		go g.serveEgress(ln)
	}
	respond(st, &response{Version: ProtocolVersion, PID: os.Getpid()})
}

// setgroupsDenied reports whether this user namespace forbids setgroups(2).
func setgroupsDenied() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err == nil && strings.TrimSpace(string(b)) == "deny"
}

// shutdown kills every process still running and stops listening.
func (g *guest) shutdown() {
	g.mu.Lock()
	g.closed = true
	procs := make([]*guestProc, 0, len(g.procs))
	for p := range g.procs {
		procs = append(procs, p)
	}
	ln := g.egress
	g.mu.Unlock()
	for _, p := range procs {
		killChild(p.pid, syscall.SIGKILL, true, nil)
	}
	if ln != nil {
		ln.Close()
	}
}
