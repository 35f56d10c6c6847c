package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// terminal is the caller's terminal while a PTY exec runs: raw mode on the
// way in, restored on the way out, window changes forwarded.
type terminal struct {
	fd     int
	saved  *unix.Termios
	winch  chan os.Signal
	active bool
}

// attachTerminal asks for a PTY when stdin and stdout are terminals.
func attachTerminal(req *sandbox.ExecRequest) (*terminal, error) {
	t := &terminal{fd: int(os.Stdin.Fd())}
	if !isTerminal(t.fd) || !isTerminal(int(os.Stdout.Fd())) {
		return t, nil
	}
	saved, err := unix.IoctlGetTermios(t.fd, unix.TCGETS)
	if err != nil {
		return t, nil
	}
	raw := *saved
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(t.fd, unix.TCSETS, &raw); err != nil {
		return t, nil
	}
	t.saved, t.active = saved, true
	t.winch = make(chan os.Signal, 1)
	signal.Notify(t.winch, syscall.SIGWINCH)
	req.TTY = true
	req.Rows, req.Cols = t.size()
	req.Stderr = nil
	return t, nil
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

func (t *terminal) size() (rows, cols uint16) {
	ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 24, 80
	}
	return ws.Row, ws.Col
}

// resized yields on SIGWINCH; nil (blocks forever) without a terminal.
func (t *terminal) resized() <-chan os.Signal { return t.winch }

func (t *terminal) restore() {
	if !t.active {
		return
	}
	signal.Stop(t.winch)
	_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.saved)
	t.active = false
}
