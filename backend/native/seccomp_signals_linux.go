package native

import (
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/agentsig"
)

// The agent is the sandbox's PID 1: the kernel drops SIGKILL and SIGSTOP
// from inside, and the agent catches the other signals kill(2) can send
// it (agent.setupProcess). What it cannot catch is a fault signal that
// looks like a real fault (any si_code but SI_USER and SI_TKILL): the Go
// runtime turns those into a crash. These are the ways to send one to
// another process, refused here (docs/RATIONALE.md, "Why can root inside
// not kill the agent?").
const (
	// offArgHigh2 is args[2]'s upper 32 bits.
	offArgHigh2 = offArgLow2 + 4
)

// signalDispatch jumps the calls that can forge a signal's si_code to
// their checks (signalChecks).
func signalDispatch(a *asm) {
	a.jeq(unix.SYS_RT_SIGQUEUEINFO, "sigqueue", "")
	a.jeq(unix.SYS_RT_TGSIGQUEUEINFO, "sigqueue", "")
	a.jeq(unix.SYS_PIDFD_SEND_SIGNAL, "pidfdsignal", "")
	a.jeq(unix.SYS_FCNTL, "fcntl", "")
}

func signalChecks(a *asm) {
	// rt_sigqueueinfo(tgid, ...), rt_tgsigqueueinfo(tgid, ...): any
	// si_code the caller likes, so never to PID 1 (the agent).
	a.label("sigqueue")
	a.ld(offArgLow0)
	a.jeq(1, "deny", "allow")
	// pidfd_send_signal(pidfd, sig, info, flags): only without info
	// (then it is kill(2)); the filter cannot tell which process a pidfd
	// is.
	a.label("pidfdsignal")
	a.ld(offArgLow2)
	a.jeq(0, "", "deny")
	a.ld(offArgHigh2)
	a.jeq(0, "allow", "deny")
	// fcntl(fd, F_SETSIG, sig): I/O readiness on fd would send sig with a
	// kernel si_code to the owner set with F_SETOWN (the agent, for the
	// same uid). Fault signals are refused.
	a.label("fcntl")
	a.ld(offArgLow1)
	a.jeq(unix.F_SETSIG, "", "allow")
	a.ld(offArgLow2)
	for _, s := range agentsig.Fault {
		a.jeq(s, "deny", "")
	}
	a.ret(unix.SECCOMP_RET_ALLOW)
}

// signalCallName names a refused signal call for violation events.
func signalCallName(nr int32) (string, bool) {
	switch nr {
	case unix.SYS_RT_SIGQUEUEINFO:
		return "rt_sigqueueinfo(pid 1)", true
	case unix.SYS_RT_TGSIGQUEUEINFO:
		return "rt_tgsigqueueinfo(pid 1)", true
	case unix.SYS_PIDFD_SEND_SIGNAL:
		return "pidfd_send_signal(siginfo)", true
	case unix.SYS_FCNTL:
		return "fcntl(F_SETSIG, fault signal)", true
	}
	return "", false
}
