package docker

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/agentsig"
)

// The seccomp profile of every container: Docker's default profile (an
// allow-list; without capabilities its namespace, mount and module calls
// are already refused) tightened with Airlock's rules, which keep the
// container's surface near the native backend's and protect the host's
// files the container writes directly:
//   - denied outright (removed from the allow-list): the native backend's
//     list — ptrace, process_vm_*, bpf, perf_event_open, userfaultfd, the
//     keyring, io_uring, mounts, chroot, setns, tkill, ...;
//   - openat2 and pidfd_send_signal answer ENOSYS (callers fall back to
//     openat and kill): their arguments cannot be filtered;
//   - no set-uid/set-gid bit on anything: the chmod family and every call
//     that creates with a mode are allowed only without them (the
//     container's files on a bind mount are the host's files);
//   - no execveat of a descriptor (AT_EMPTY_PATH): a memfd's code never
//     was on the sandbox's filesystem;
//   - no signal to pid 1, the agent (a handled signal such as SIGABRT
//     would reach it: a pid namespace's init is only shielded from
//     signals it does not handle).

// deniedSyscalls fail with EPERM whatever their arguments.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"mount", "umount", "umount2", "pivot_root", "chroot", "setns", "unshare",
	"fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"reboot", "swapon", "swapoff", "open_by_handle_at", "name_to_handle_at", "acct",
	"settimeofday", "clock_settime", "iopl", "ioperm", "quotactl", "vhangup", "syslog",
	"tkill", "lookup_dcookie", "nfsservctl",
}

// nosysSyscalls answer ENOSYS.
var nosysSyscalls = []string{"openat2", "pidfd_send_signal"}

const setIDBits = unix.S_ISUID | unix.S_ISGID

// modeArg is where the mode argument of a creating or chmod-family call is.
var modeArg = map[string]uint{
	"chmod": 1, "fchmod": 1, "creat": 1, "mkdir": 1, "mknod": 1,
	"fchmodat": 2, "mkdirat": 2, "mknodat": 2,
}

// openArgs: the flags and mode arguments of the open calls.
var openArgs = map[string][2]uint{"open": {1, 2}, "openat": {2, 3}}

// signalCalls take the target pid (or tgid) as their first argument.
var signalCalls = []string{"kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"}

var (
	profileOnce sync.Once
	profileJSON string
	profileErr  error
)

// seccompProfile returns the profile as dockerd takes it (the JSON text
// after "seccomp=").
func seccompProfile() (string, error) {
	profileOnce.Do(func() {
		b, err := json.Marshal(buildProfile())
		profileJSON, profileErr = string(b), err
	})
	return profileJSON, profileErr
}

func buildProfile() *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	changed := append(append(append([]string{"execveat", "fcntl"}, deniedSyscalls...), nosysSyscalls...), signalCalls...)
	for name := range modeArg {
		changed = append(changed, name)
	}
	for name := range openArgs {
		changed = append(changed, name)
	}
	// Take every call we decide ourselves out of Docker's allow rules.
	var kept []*seccomp.Syscall
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow {
			r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return slices.Contains(changed, n) })
			if len(r.Names) == 0 {
				continue
			}
		}
		kept = append(kept, r)
	}
	nosys := uint(unix.ENOSYS)
	eperm := uint(unix.EPERM)
	allow := func(names []string, args ...specs.LinuxSeccompArg) *seccomp.Syscall {
		return &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: names, Action: specs.ActAllow, Args: args}}
	}
	kept = append(kept,
		&seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm}},
		&seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: nosysSyscalls, Action: specs.ActErrno, ErrnoRet: &nosys}},
	)
	noSetID := func(idx uint) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: idx, Value: setIDBits, ValueTwo: 0, Op: specs.OpMaskedEqual}
	}
	for _, name := range sortedKeys(modeArg) {
		kept = append(kept, allow([]string{name}, noSetID(modeArg[name])))
	}
	// open/openat: allowed when they create nothing (neither O_CREAT nor
	// O_TMPFILE, whose mode applies too), or when the mode has no set-id
	// bit. Two rules for one call: either allows.
	for _, name := range sortedKeys(openArgs) {
		a := openArgs[name]
		kept = append(kept,
			allow([]string{name}, specs.LinuxSeccompArg{Index: a[0], Value: unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY, ValueTwo: 0, Op: specs.OpMaskedEqual}),
			allow([]string{name}, noSetID(a[1])),
		)
	}
	kept = append(kept, allow([]string{"execveat"}, specs.LinuxSeccompArg{Index: 4, Value: unix.AT_EMPTY_PATH, ValueTwo: 0, Op: specs.OpMaskedEqual}))
	kept = append(kept, allow(signalCalls, specs.LinuxSeccompArg{Index: 0, Value: 1, Op: specs.OpNotEqual}))
	kept = append(kept, fcntlRules(allow)...)
	p.Syscalls = kept
	return p
}

// fcntlRules allow fcntl except F_SETSIG of a fault signal (agentsig): I/O readiness
// would send it with a kernel si_code to the F_SETOWN owner (the agent).
// Docker's profile language has no "not one of" on one argument, so each
// other signal (and 0, the default SIGIO) is allowed by a rule of its own.
func fcntlRules(allow func([]string, ...specs.LinuxSeccompArg) *seccomp.Syscall) []*seccomp.Syscall {
	rules := []*seccomp.Syscall{allow([]string{"fcntl"}, specs.LinuxSeccompArg{Index: 1, Value: unix.F_SETSIG, Op: specs.OpNotEqual})}
	for sig := uint64(0); sig <= 64; sig++ {
		if slices.Contains(agentsig.Fault, uint32(sig)) {
			continue
		}
		rules = append(rules, allow([]string{"fcntl"},
			specs.LinuxSeccompArg{Index: 1, Value: unix.F_SETSIG, Op: specs.OpEqualTo},
			specs.LinuxSeccompArg{Index: 2, Value: sig, Op: specs.OpEqualTo}))
	}
	return rules
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
