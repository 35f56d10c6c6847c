package main

// The client side of `airlock run --session NAME -- CMD`: find (or start)
// the user's warm sandbox for this key, hand it the command with this
// process's own stdio descriptors, forward signals and window changes,
// and exit with the command's status. The daemon is sessiond_linux.go.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/airlock-dev/airlock/sandbox"
)

// sessionRequest is the first message of a connection; the caller's
// stdin, stdout and stderr ride with it (SCM_RIGHTS).
type sessionRequest struct {
	Args []string `json:"args,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
	End  bool     `json:"end,omitempty"`
}

// sessionReply is the daemon's last message: the exit code, and why
// airlock failed when it did.
type sessionReply struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// Control frames from the client after the request: a type byte and a
// big-endian uint32.
const (
	ctlSignal = 's' // the signal number
	ctlResize = 'r' // rows<<16 | cols
)

// sessionDir is the caller's own directory of session sockets: root's
// under /run, a user's under XDG_RUNTIME_DIR (else /tmp), made 0700 and
// refused when another user owns it or it is not a plain directory.
func sessionDir() (string, error) {
	uid := os.Getuid()
	dir := "/run/airlock/sessions"
	if uid != 0 {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
			dir = filepath.Join(rt, "airlock-sessions")
		} else {
			dir = "/tmp/airlock-sessions-" + itoa(uid)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("session directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return "", fmt.Errorf("session directory: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != uid || st.Mode&0o077 != 0 {
		return "", fmt.Errorf("session directory %s: not a directory of uid %d with mode 0700: %w", dir, uid, sandbox.ErrPermission)
	}
	return dir, nil
}

// runSession runs argv in the session's sandbox (starting it first when
// none serves the key), or ends the session with --end.
func runSession(fs *flag.FlagSet, f *runFlags, argv, args []string) int {
	dir, err := sessionDir()
	if err != nil {
		return fail("run", err)
	}
	base := filepath.Join(dir, sessionKey(fs, f))
	if f.endSession {
		conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: base + ".sock", Net: "unix"})
		if err != nil {
			// No session, or a crashed one: remove what it left.
			if unlock, lerr := lockSession(base); lerr == nil {
				if c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: base + ".sock", Net: "unix"}); err == nil {
					unlock()
					return sessionCall(c, sessionRequest{End: true})
				}
				removeSessionFiles(base)
				unlock()
			}
			return 0
		}
		return sessionCall(conn, sessionRequest{End: true})
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "airlock run: no command given (usage: airlock run --session NAME [flags] -- CMD [ARGS])")
		return exitAirlock
	}
	conn, err := dialSession(base, args)
	if err != nil {
		return fail("run", err)
	}
	req := sessionRequest{Args: argv}
	t := &terminal{fd: 0}
	if term.IsTerminal(0) && term.IsTerminal(1) {
		if saved, err := term.MakeRaw(0); err == nil {
			t.saved, t.active = saved, true
			t.winch = notifyResize()
			req.TTY = true
			req.Rows, req.Cols = t.size()
		}
	}
	defer t.restore()
	return sessionCallTerm(conn, req, t)
}

// dialSession connects to the session's daemon, starting one (under the
// session's lock, so two callers at once start one) when none answers: a
// crashed daemon leaves a socket nobody listens on, which is replaced.
func dialSession(base string, args []string) (*net.UnixConn, error) {
	addr := &net.UnixAddr{Name: base + ".sock", Net: "unix"}
	if c, err := net.DialUnix("unix", nil, addr); err == nil {
		return c, nil
	}
	unlock, err := lockSession(base)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if c, err := net.DialUnix("unix", nil, addr); err == nil {
		return c, nil // another caller started it while we waited
	}
	_ = os.Remove(addr.Name)
	if err := startSessionDaemon(base, args); err != nil {
		removeSessionFiles(base) // under the lock: a failed start leaves nothing
		return nil, err
	}
	c, err := net.DialUnix("unix", nil, addr)
	if err != nil {
		return nil, fmt.Errorf("connect to session: %w", err)
	}
	return c, nil
}

// lockSession takes the session's start lock. A daemon that ends removes
// the lock file while holding it, so a lock taken on a file since removed
// is taken again on the new one.
func lockSession(base string) (func(), error) {
	for {
		fl, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("session lock: %w", err)
		}
		if err := unix.Flock(int(fl.Fd()), unix.LOCK_EX); err != nil {
			fl.Close()
			return nil, fmt.Errorf("session lock: %w", err)
		}
		var a, b unix.Stat_t
		if unix.Fstat(int(fl.Fd()), &a) == nil && unix.Stat(base+".lock", &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return func() { fl.Close() }, nil
		}
		fl.Close()
	}
}

// removeSessionFiles removes a session's socket, log and lock (the daemon
// calls it at its end, holding the lock).
func removeSessionFiles(base string) {
	_ = os.Remove(base + ".sock")
	_ = os.Remove(base + ".log")
	_ = os.Remove(base + ".lock")
}

// startSessionDaemon starts `airlock __session` with the run's flags in
// a session of its own (it outlives this caller) and waits until it
// serves or says why it cannot.
func startSessionDaemon(base string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	logf, err := os.OpenFile(base+".log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return fmt.Errorf("start session: %w", err)
	}
	defer null.Close()
	p, err := os.StartProcess(exe, append([]string{exe, sessionDaemonCommand}, args...), &os.ProcAttr{
		Files: []*os.File{null, logf, logf, w},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	w.Close()
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	_ = p.Release()
	msg, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	if string(msg) != "ok\n" {
		if len(msg) == 0 {
			msg, _ = os.ReadFile(base + ".log")
		}
		return fmt.Errorf("start session: %s", string(msg))
	}
	return nil
}

// sessionCall sends req and waits for the reply (no stdio forwarding).
func sessionCall(conn *net.UnixConn, req sessionRequest) int {
	return sessionCallTerm(conn, req, &terminal{})
}

// sessionCallTerm sends req with this process's stdio, forwards signals
// (and window changes with a terminal) until the reply, and returns the
// command's exit code.
func sessionCallTerm(conn *net.UnixConn, req sessionRequest, t *terminal) int {
	defer conn.Close()
	body, _ := json.Marshal(req)
	msg := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	if _, _, err := conn.WriteMsgUnix(msg, unix.UnixRights(0, 1, 2), nil); err != nil {
		return fail("run", fmt.Errorf("session: send command: %w", err))
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	go func() {
		for {
			var v uint32
			typ := byte(ctlSignal)
			select {
			case s := <-sigs:
				v = uint32(s.(syscall.Signal))
			case <-t.resized():
				rows, cols := t.size()
				typ, v = ctlResize, uint32(rows)<<16|uint32(cols)
			}
			frame := binary.BigEndian.AppendUint32([]byte{typ}, v)
			if _, err := conn.Write(frame); err != nil {
				return
			}
		}
	}()
	var rep sessionReply
	if err := json.NewDecoder(io.LimitReader(conn, 64<<10)).Decode(&rep); err != nil {
		return fail("run", fmt.Errorf("session: no reply (the session ended?): %w", err))
	}
	if rep.Error != "" {
		t.restore()
		fmt.Fprintf(os.Stderr, "airlock run: %s\n", rep.Error)
	}
	return rep.Code
}

// sessionConnOwner says whether the peer of c runs as this process's uid:
// only the user who started a session may attach to it.
func sessionConnOwner(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("uid %d may not attach to a session of uid %d: %w", cred.Uid, os.Getuid(), sandbox.ErrPermission)
	}
	return nil
}

var errNoFds = errors.New("the request carried no stdio descriptors")
