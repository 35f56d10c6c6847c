package agent

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// StdioConn turns the process's stdin and stdout into the agent channel
// (gVisor and Docker start the agent as the container's init with the
// channel on its stdio). The two descriptors are moved to close-on-exec
// copies and fds 0 and 1 are pointed at /dev/null, so nothing else can
// write into the protocol stream and no child inherits it.
func StdioConn() (io.ReadWriteCloser, error) {
	in, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("agent stdio: dup stdin: %w", err)
	}
	out, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		unix.Close(in)
		return nil, fmt.Errorf("agent stdio: dup stdout: %w", err)
	}
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		unix.Dup3(null, 0, 0)
		unix.Dup3(null, 1, 0)
		unix.Close(null)
	}
	// Non-blocking descriptors are polled by the runtime, so closing them
	// interrupts a pending read (a regular file falls back to blocking).
	// Only pipes and sockets: a terminal's description may be shared.
	for _, fd := range []int{in, out} {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && (st.Mode&unix.S_IFMT == unix.S_IFIFO || st.Mode&unix.S_IFMT == unix.S_IFSOCK) {
			unix.SetNonblock(fd, true)
		}
	}
	return &stdio{r: os.NewFile(uintptr(in), "agent-in"), w: os.NewFile(uintptr(out), "agent-out")}, nil
}

type stdio struct {
	r, w *os.File
}

func (s *stdio) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *stdio) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s *stdio) Close() error                { return errors.Join(s.r.Close(), s.w.Close()) }
