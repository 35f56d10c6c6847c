package main

// The client side of `airlock run --session NAME -- CMD`: find (or start)
// the user's warm sandbox for this key, hand it the command with this
// process's own stdio descriptors, forward signals and window changes,
// and exit with the command's status. The daemon is sessiond_linux.go.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/cmd/airlock/internal/sessclient"
	"github.com/airlock-dev/airlock/sandbox"
)

// The protocol and the client's call live in sessclient, whose init runs
// the plain case (a daemon already serving) before the rest of the
// binary's package inits; what is here starts a daemon or ends one.
type (
	sessionRequest = sessclient.Request
	sessionReply   = sessclient.Reply
)

const (
	ctlSignal = sessclient.CtlSignal
	ctlResize = sessclient.CtlResize
)

// sessionDir is the caller's own directory of session sockets
// (sessclient.Dir), refused with a permission error when not its own.
func sessionDir() (string, error) {
	dir, err := sessclient.Dir()
	if errors.Is(err, sessclient.ErrDir) {
		return "", fmt.Errorf("%w: %w", err, sandbox.ErrPermission)
	}
	return dir, err
}

// runSession runs argv in the session's sandbox (starting it first when
// none serves the key), or ends the session with --end.
func runSession(fs *flag.FlagSet, f *runFlags, argv, args []string) int {
	dir, err := sessionDir()
	if err != nil {
		return fail("run", err)
	}
	base := filepath.Join(dir, sessionKey(args))
	if f.endSession {
		conn, err := sessclient.Dial(base + ".sock")
		if err != nil {
			// No session, or a crashed one: remove what it left.
			if unlock, lerr := lockSession(base); lerr == nil {
				if c, err := sessclient.Dial(base + ".sock"); err == nil {
					unlock()
					return sessclient.CallTerm(c, sessionRequest{End: true})
				}
				removeSessionFiles(base)
				unlock()
			}
			return 0
		}
		return sessclient.CallTerm(conn, sessionRequest{End: true})
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "airlock run: no command given (usage: airlock run --session NAME [flags] -- CMD [ARGS])")
		return exitAirlock
	}
	conn, err := dialSession(base, args)
	if err != nil {
		return fail("run", err)
	}
	return sessclient.CallTerm(conn, sessionRequest{Args: argv})
}

// dialSession connects to the session's daemon, starting one (under the
// session's lock, so two callers at once start one) when none answers: a
// crashed daemon leaves a socket nobody listens on, which is replaced.
func dialSession(base string, args []string) (int, error) {
	sock := base + ".sock"
	if c, err := sessclient.Dial(sock); err == nil {
		return c, nil
	}
	unlock, err := lockSession(base)
	if err != nil {
		return -1, err
	}
	defer unlock()
	if c, err := sessclient.Dial(sock); err == nil {
		return c, nil // another caller started it while we waited
	}
	_ = os.Remove(sock)
	if err := startSessionDaemon(base, args); err != nil {
		removeSessionFiles(base) // under the lock: a failed start leaves nothing
		return -1, err
	}
	c, err := sessclient.Dial(sock)
	if err != nil {
		return -1, fmt.Errorf("connect to session: %w", err)
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
