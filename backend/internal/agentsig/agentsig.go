// Package agentsig is the one list of signals a sandbox's processes must
// never be able to send the agent (its PID 1) with a kernel-like si_code:
// the Go runtime crashes on them (sigtable: _SigPanic or _SigThrow),
// where it catches every other signal kill(2) can send. Every backend's
// filter (native and microvm BPF, docker's and gVisor's profiles) refuses
// the ways to forge one from this list; it must never hold anything but
// signal numbers (no policy, no platform code: it builds everywhere).
package agentsig

// Fault is SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSTKFLT and SIGSYS
// (Linux numbers).
var Fault = []uint32{4, 5, 7, 8, 11, 16, 31}

// FSetSig is fcntl's F_SETSIG: I/O readiness on the descriptor then
// sends the chosen signal, with a kernel si_code, to its F_SETOWN owner.
const FSetSig = 10
