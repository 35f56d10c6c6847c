package native

import (
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
// and reports each as a violation. It owns the listener fd.
type supervisor struct {
	fd     int
	wake   [2]int
	count  atomic.Int64
	report func(name string, pid uint32)
	done   chan struct{}
}

func newSupervisor(fd int, report func(string, uint32)) (*supervisor, error) {
	s := &supervisor{fd: fd, report: report, done: make(chan struct{})}
	if err := unix.Pipe2(s.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	go s.loop()
	return s, nil
}

func (s *supervisor) loop() {
	defer close(s.done)
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.wake[0]), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			if fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				return // every process that could notify is gone
			}
			continue
		}
		var n seccompNotif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); e != 0 {
			if e == unix.EINTR || e == unix.ENOENT {
				continue // interrupted, or the caller died meanwhile
			}
			return
		}
		resp := seccompNotifResp{ID: n.ID, Error: -int32(unix.EPERM)}
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		s.count.Add(1)
		if s.report != nil {
			s.report(syscallName(n.Nr, n.Args), n.Pid)
		}
	}
}

// stop ends the loop and closes the listener (idempotent only once).
func (s *supervisor) stop() {
	_, _ = unix.Write(s.wake[1], []byte{1})
	<-s.done
	unix.Close(s.fd)
	unix.Close(s.wake[0])
	unix.Close(s.wake[1])
}
