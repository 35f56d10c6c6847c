package native

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/fsguard"
)

// supervisor answers the sandbox's seccomp notifications from the host:
// calls of the write mediator's (fsguard) go to it; every other one is a
// denied call, answered EPERM and reported as a violation. It runs on one
// OS thread of its own, which the mediator gives the sandbox's file-system
// credentials: calls are decided and performed one at a time.
type supervisor struct {
	fd     int
	med    *fsguard.Mediator // nil: no write mediation
	count  atomic.Int64      // denied calls (not counting mediator refusals, reported apart)
	report func(name string, pid uint32)
	stopFD int // eventfd: stop asks the loop to end
	done   chan struct{}

	quit     chan struct{} // closed by stop
	stopOnce sync.Once
	prepared chan error      // the loop's thread is ready (or could not be)
	attach   chan attachment // the listener and mediator, once the init sent them
}

type attachment struct {
	fd  int
	med *fsguard.Mediator
}

// startSupervisor starts the loop's goroutine, which prepares its thread
// (with creds, for the write mediator) while the init sets up; attach then
// hands it the listener. stop must be called once in any case.
func startSupervisor(creds *fsguard.Creds, report func(string, uint32)) (*supervisor, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	s := &supervisor{fd: -1, report: report, stopFD: efd, done: make(chan struct{}), quit: make(chan struct{}),
		prepared: make(chan error, 1), attach: make(chan attachment, 1)}
	go s.loop(creds)
	return s, nil
}

// start takes ownership of the listener fd (and of med) and lets the loop
// serve it; it returns once the loop's thread is prepared.
func (s *supervisor) start(fd int, med *fsguard.Mediator) error {
	// Synchronous wake-ups (6.6+): the kernel switches straight to our
	// thread when a call blocks, halving the round trip. Best effort.
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	s.attach <- attachment{fd, med}
	return <-s.prepared
}

func (s *supervisor) loop(creds *fsguard.Creds) {
	defer close(s.done)
	defer func() {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
		if s.med != nil {
			s.med.Close()
		}
	}()
	var perr error
	if creds != nil {
		// Locks this goroutine to its thread for good: the thread, which
		// now has the sandbox's credentials, dies when the loop returns.
		perr = fsguard.PrepareThread(*creds)
	}
	var a attachment
	select {
	case a = <-s.attach:
	case <-s.quit:
		s.prepared <- errors.New("supervisor stopped")
		return
	}
	s.fd, s.med = a.fd, a.med
	if perr == nil && s.med != nil && creds == nil {
		perr = errors.New("write mediation without credentials")
	}
	s.prepared <- perr
	if perr != nil {
		return
	}
	pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.stopFD), Events: unix.POLLIN}}
	var throttle denialThrottle
	for {
		pfd[0].Revents, pfd[1].Revents = 0, 0
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if pfd[1].Revents != 0 {
			return
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			if pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				return // every process that could notify is gone
			}
			continue
		}
		var n fsguard.Notif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); e != 0 {
			continue // interrupted, or the caller died meanwhile
		}
		if s.med != nil && fsguard.Handles(n.Nr) {
			resp, sent := s.med.Handle(&n)
			if !sent {
				s.send(&resp)
			}
			continue
		}
		resp := fsguard.Response{ID: n.ID, Error: -int32(unix.EPERM)}
		if d := throttle.pause(time.Now()); d > 0 {
			time.Sleep(d)
		}
		s.send(&resp)
		s.count.Add(1)
		if s.report != nil {
			s.report(syscallName(n.Nr, n.Args), n.Pid)
		}
	}
}

func (s *supervisor) send(resp *fsguard.Response) {
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
}

// stop ends the loop and closes the listener. Idempotent.
func (s *supervisor) stop() { s.stopOnce.Do(s.doStop) }

func (s *supervisor) doStop() {
	var one [8]byte
	one[0] = 1
	close(s.quit)
	_, _ = unix.Write(s.stopFD, one[:])
	<-s.done
	unix.Close(s.stopFD)
}
