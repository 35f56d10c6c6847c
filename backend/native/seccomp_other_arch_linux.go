//go:build linux && !amd64

package native

// Only x86_64 has a syscall table here; elsewhere buildFilter reports
// seccomp as unsupported and the backend fails closed.
const x32SyscallBit = 0

var auditArch = map[string]uint32{}

var deniedSyscallTable = []struct {
	nr   int
	name string
}{}
