package agent

import (
	"encoding/binary"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// copyOutput forwards one output stream as frames (or drops it when the
// host did not ask for it), applying the drain rules after the exit.
func (p *guestProc) copyOutput(f *os.File, typ byte, want bool) {
	buf := make([]byte, chunkSize)
	after := 0
	forward := func(b []byte) {
		if p.exited.Load() {
			after += len(b)
		}
		if want && !p.hostBroken.Load() {
			if p.send(typ, b) != nil {
				p.hostBroken.Store(true)
			}
		}
	}
	for after <= drainMax {
		if p.exited.Load() {
			f.SetReadDeadline(time.Now().Add(drainIdle))
		}
		n, err := f.Read(buf)
		if n > 0 {
			forward(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A deadline can expire before a late-scheduled read even
			// looked: take what the pipe holds now, without waiting.
			f.SetReadDeadline(time.Time{})
			for after <= drainMax {
				n := readNow(f, buf)
				if n <= 0 {
					return
				}
				forward(buf[:n])
			}
			return
		}
		if err != nil {
			return // EOF, or EIO: a pty with no slave left
		}
	}
}

// readNow reads what f holds without blocking (f is non-blocking): the
// byte count, 0 at end of file, -1 when nothing is there.
func readNow(f *os.File, buf []byte) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	rc.Control(func(fd uintptr) {
		var rerr error
		n, rerr = unix.Read(int(fd), buf)
		if rerr != nil {
			n = -1
		}
	})
	return n
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
				killChild(p.pid, syscall.SIGKILL, true, nil)
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
				killChild(p.pid, syscall.SIGKILL, true, nil)
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
				killChild(p.pid, syscall.Signal(payload[0]), payload[1] == 1, nil)
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
