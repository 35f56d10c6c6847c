package main

// Crashing the agent: the Go runtime dies of a fault signal (SIGSEGV,
// SIGABRT, ...) sent by kill(2) unless it catches it, and of one with a
// kernel-like si_code whatever it catches. Each way to send one is its
// own attack ("how"), proven on the host's stand-in agent.

import (
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { register("crash", attackCrash) }

var crashSignals = []unix.Signal{unix.SIGSEGV, unix.SIGABRT, unix.SIGILL, unix.SIGBUS, unix.SIGFPE,
	unix.SIGTRAP, unix.SIGSYS, unix.SIGSTKFLT, unix.SIGTERM, unix.SIGQUIT, unix.SIGINT, unix.SIGHUP}

func attackCrash(p params) {
	var res []string
	for _, pid := range pidList(p) {
		if pid == unix.Getpid() || pid <= 0 {
			continue
		}
		err := crashSend(p.get("how"), pid)
		if err != nil {
			res = append(res, "pid "+strconv.Itoa(pid)+": "+err.Error())
			continue
		}
		if died(pid) {
			escaped("%s to pid %d: it died", p.get("how"), pid)
		}
		res = append(res, "pid "+strconv.Itoa(pid)+" survived "+p.get("how"))
	}
	blocked("%s", strings.Join(res, "; "))
}

// crashSend sends pid fault signals one way.
func crashSend(how string, pid int) error {
	info := func(sig unix.Signal) *unix.Siginfo {
		si := &unix.Siginfo{Signo: int32(sig), Code: -1} // SI_QUEUE
		return si
	}
	switch how {
	case "kill":
		var errs []string
		for _, s := range crashSignals {
			if err := unix.Kill(pid, s); err != nil {
				errs = append(errs, s.String()+": "+err.Error())
			}
		}
		if len(errs) == len(crashSignals) {
			return errorString(strings.Join(errs, ", "))
		}
		return nil
	case "sigqueue":
		si := info(unix.SIGSEGV)
		if _, _, e := unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(si))); e != 0 {
			return e
		}
		return nil
	case "pidfd":
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.PidfdSendSignal(fd, unix.SIGSEGV, info(unix.SIGSEGV), 0)
	case "fsetsig":
		var pfd [2]int
		if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		defer unix.Close(pfd[0])
		defer unix.Close(pfd[1])
		if _, err := unix.FcntlInt(uintptr(pfd[0]), unix.F_SETSIG, int(unix.SIGSEGV)); err != nil {
			return err
		}
		if _, err := unix.FcntlInt(uintptr(pfd[0]), unix.F_SETOWN, pid); err != nil {
			return err
		}
		fl, _ := unix.FcntlInt(uintptr(pfd[0]), unix.F_GETFL, 0)
		if _, err := unix.FcntlInt(uintptr(pfd[0]), unix.F_SETFL, fl|unix.O_ASYNC); err != nil {
			return err
		}
		_, err := unix.Write(pfd[1], []byte("x"))
		return err
	}
	fail("unknown how %q", how)
	return nil
}

// died waits up to a second for pid to be gone (or a zombie).
func died(pid int) bool {
	for i := 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || procState(st) == "Z" || procState(st) == "X" {
			return true
		}
	}
	return false
}

type errorString string

func (e errorString) Error() string { return string(e) }
