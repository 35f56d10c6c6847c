package agent

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// noPTYPeer makes openPTY use the /dev/pts path (tests of the fallback).
var noPTYPeer bool

// openPTY allocates a pseudo-terminal through /dev/ptmx without cgo. The
// master is non-blocking (so reads can have deadlines); the slave is
// blocking, for the child. Both are close-on-exec in the agent.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// TIOCGPTPEER opens the slave relative to the master, immune to a
	// /dev/pts that is not the master's devpts; fall back to the path.
	sfd, errno := -1, unix.ENOTTY
	if !noPTYPeer {
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		sfd, errno = int(r), e
	}
	if errno != 0 {
		n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
		if err != nil {
			unix.Close(mfd)
			return nil, nil, fmt.Errorf("get pty number: %w", err)
		}
		sfd, err = unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(mfd)
			return nil, nil, fmt.Errorf("open pty slave: %w", err)
		}
	}
	if err := unix.SetNonblock(mfd, true); err != nil {
		unix.Close(mfd)
		unix.Close(sfd)
		return nil, nil, fmt.Errorf("pty master: %w", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), "pty"), nil
}

func setWinsize(f *os.File, rows, cols uint16) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = conn.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err != nil {
		return err
	}
	return ierr
}

// winchFallback sends SIGWINCH to process group pgrp when the kernel did
// not: gVisor (runsc 2022) neither signals a size change nor answers
// TIOCGPGRP on the master side, which Linux does; so a failing TIOCGPGRP is
// the sign. The process's own group stands in for the foreground group.
func winchFallback(f *os.File, pgrp int) {
	conn, err := f.SyscallConn()
	if err != nil || pgrp <= 0 {
		return
	}
	conn.Control(func(fd uintptr) {
		if _, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == unix.ENOTTY {
			unix.Kill(-pgrp, unix.SIGWINCH)
		}
	})
}
