package main

import (
	"os"

	"golang.org/x/term"

	"github.com/airlock-dev/airlock/sandbox"
)

// terminal is the caller's terminal while a PTY exec runs: raw mode on the
// way in, restored on the way out, window changes forwarded. It works on
// every OS (golang.org/x/term); only the resize notification is per-OS
// (terminal_unix.go, terminal_other.go).
type terminal struct {
	fd     int
	saved  *term.State
	winch  chan os.Signal
	active bool
}

// attachTerminal asks for a PTY when stdin and stdout are terminals.
func attachTerminal(req *sandbox.ExecRequest) (*terminal, error) {
	t := &terminal{fd: int(os.Stdin.Fd())}
	if !term.IsTerminal(t.fd) || !term.IsTerminal(int(os.Stdout.Fd())) {
		return t, nil
	}
	saved, err := term.MakeRaw(t.fd)
	if err != nil {
		return t, nil
	}
	t.saved, t.active = saved, true
	t.winch = notifyResize()
	req.TTY = true
	req.Rows, req.Cols = t.size()
	req.Stderr = nil
	return t, nil
}

func (t *terminal) size() (rows, cols uint16) {
	w, h, err := term.GetSize(int(os.Stdout.Fd()))
	if err != nil || w <= 0 || h <= 0 || w > 0xffff || h > 0xffff {
		return 24, 80
	}
	return uint16(h), uint16(w)
}

// resized yields on a window change; nil (blocks forever) without a
// terminal or where the OS does not tell.
func (t *terminal) resized() <-chan os.Signal { return t.winch }

func (t *terminal) restore() {
	if !t.active {
		return
	}
	stopResize(t.winch)
	_ = term.Restore(t.fd, t.saved)
	t.active = false
}
