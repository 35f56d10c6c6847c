package native

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompNotif mirrors struct seccomp_notif (80 bytes on every arch).
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// seccompNotifResp mirrors struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// supervisor answers the sandbox's denied syscalls with EPERM from the host
// and reports each as a violation. It owns the listener, which waits in the
// runtime's poller (no OS thread per sandbox).
type supervisor struct {
	f      *os.File
	count  atomic.Int64
	report func(name string, pid uint32)
	done   chan struct{}
}

func newSupervisor(fd int, report func(string, uint32)) (*supervisor, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	s := &supervisor{f: os.NewFile(uintptr(fd), "seccomp-listener"), report: report, done: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *supervisor) loop() {
	defer close(s.done)
	rc, err := s.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n seccompNotif
		var got, gone bool
		err := rc.Read(func(fd uintptr) bool {
			// RECV blocks whatever the file flags say: only call it when
			// poll says a notification is pending.
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if k, err := unix.Poll(pfd, 0); err != nil || k == 0 {
				return false
			}
			if pfd[0].Revents&unix.POLLIN == 0 {
				gone = pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
				return gone
			}
			n = seccompNotif{}
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); e != 0 {
				return true // interrupted, or the caller died meanwhile: look again
			}
			got = true
			resp := seccompNotifResp{ID: n.ID, Error: -int32(unix.EPERM)}
			_, _, _ = unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
			return true
		})
		if err != nil || gone {
			return // closed by stop, or every process that could notify is gone
		}
		if got {
			s.count.Add(1)
			if s.report != nil {
				s.report(syscallName(n.Nr, n.Args), n.Pid)
			}
		}
	}
}

// stop ends the loop and closes the listener. Call once.
func (s *supervisor) stop() {
	s.f.Close()
	<-s.done
}
