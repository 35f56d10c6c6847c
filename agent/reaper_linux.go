package agent

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reaper is the process's one wait loop. As PID 1 (or a child subreaper)
// the agent inherits every orphan of the sandbox; all of them are reaped
// here, and statuses of processes the agent started are dispatched to their
// waiters by pid. Nothing else in the process may wait for children (no
// exec.Cmd.Wait, no os.Process.Wait): they would race with this loop.
//
// The loop blocks in waitid(P_ALL, WEXITED|WNOWAIT), which wakes as soon as
// any child can be reaped without reaping it, then reaps with
// wait4(-1, WNOHANG) under mu. mu is also held while forking and
// registering a child and while signalling one, so a pid is never
// signalled after it was reaped (and possibly reused). With no child at
// all, the loop sleeps until spawn (or a SIGCHLD) wakes it.
var reaper struct {
	once    sync.Once
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
	wake    chan struct{}
}

func startReaper() {
	reaper.once.Do(func() {
		reaper.waiters = map[int]chan syscall.WaitStatus{}
		reaper.wake = make(chan struct{}, 1)
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGCHLD)
		go func() {
			for range sigs {
				wakeReaper()
			}
		}()
		go reapLoop()
	})
}

func wakeReaper() {
	select {
	case reaper.wake <- struct{}{}:
	default:
	}
}

func reapLoop() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil)
		switch err {
		case nil:
			reapAll()
		case unix.EINTR:
		case unix.ECHILD:
			<-reaper.wake
		default:
			reapAll() // unexpected: fall back to polling on SIGCHLD
			<-reaper.wake
		}
	}
}

// reapAll collects every exited child without blocking.
func reapAll() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if !ws.Exited() && !ws.Signaled() {
			continue // stopped/continued: not an exit
		}
		if w, ok := reaper.waiters[pid]; ok {
			delete(reaper.waiters, pid)
			w <- ws
		}
	}
}

// spawn forks and execs under the reaper lock and registers the child, so
// its exit status cannot be reaped before someone waits for it.
// The fork happens on the spawn thread (see spawner).
func spawn(argv0 string, argv []string, attr *syscall.ProcAttr) (pid int, ch <-chan syscall.WaitStatus, err error) {
	if serr := onSpawnThread(func() { pid, ch, err = spawnLocked(argv0, argv, attr) }); serr != nil {
		return 0, nil, serr
	}
	return pid, ch, err
}

func spawnLocked(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	reaper.waiters[pid] = ch
	wakeReaper()
	return pid, ch, nil
}

// killChild signals pid (and its process group when group is set) unless it
// was already reaped; then, still under the reaper's lock, it calls
// onKilled (if not nil).
func killChild(pid int, sig syscall.Signal, group bool, onKilled func()) error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if _, ok := reaper.waiters[pid]; !ok {
		return syscall.ESRCH
	}
	if group {
		// The child leads its own session and group (setsid); the group id
		// stays reserved while any member lives, even after the leader died.
		unix.Kill(-pid, sig)
	}
	err := unix.Kill(pid, sig)
	if err == nil && onKilled != nil {
		onKilled()
	}
	return err
}
