package gvisor

import "github.com/airlock-dev/airlock/backend/internal/agentsig"

// The OCI seccomp profile every sandbox gets (runsc --oci-seccomp: gVisor's
// kernel enforces it on the sandbox's processes). gVisor answers these
// calls itself, so none reaches the host kernel; the profile keeps the
// sandbox's surface the same as the native backend's (no nested
// namespaces, mounts, io_uring, BPF, keyrings, ...) and protects the agent
// (pid 1), which gVisor before 2023 lets processes of the same user kill.

type ociSeccomp struct {
	DefaultAction string           `json:"defaultAction"`
	Architectures []string         `json:"architectures,omitempty"`
	Syscalls      []ociSyscallRule `json:"syscalls"`
}

type ociSyscallRule struct {
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	ErrnoRet *uint        `json:"errnoRet,omitempty"`
	Args     []ociSeccArg `json:"args,omitempty"`
}

type ociSeccArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

const errnoEPERM uint = 1

// deniedSyscalls fail with EPERM whatever their arguments (the native
// backend's list).
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	"mount", "umount2", "pivot_root", "chroot", "setns",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"reboot", "swapon", "swapoff", "open_by_handle_at", "name_to_handle_at", "acct",
	"settimeofday", "clock_settime", "iopl", "ioperm", "quotactl", "vhangup", "syslog",
	"tkill", // obsolete; could target any thread of the agent
}

// cloneNewFlags are the namespace flags clone and unshare may not use.
var cloneNewFlags = []uint64{
	0x00000080, // CLONE_NEWTIME
	0x00020000, // CLONE_NEWNS
	0x02000000, // CLONE_NEWCGROUP
	0x04000000, // CLONE_NEWUTS
	0x08000000, // CLONE_NEWIPC
	0x10000000, // CLONE_NEWUSER
	0x20000000, // CLONE_NEWPID
	0x40000000, // CLONE_NEWNET
}

const (
	atEmptyPath = 0x1000
	oCreat      = 0o100
)

func seccompProfile() *ociSeccomp {
	// No rule for clone3 (whose flags a filter cannot read): runsc
	// ignores errnoRet, so an ENOSYS rule would become EPERM and break
	// pthread_create; the agent refuses it itself (GuestConfig.NoClone3).
	eperm := errnoEPERM
	p := &ociSeccomp{
		DefaultAction: "SCMP_ACT_ALLOW",
		Syscalls: []ociSyscallRule{
			{Names: deniedSyscalls, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm},
			// fexecve of an anonymous file (memfd): code that never was on
			// the sandbox's filesystem.
			{Names: []string{"execveat"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
				Args: []ociSeccArg{{Index: 4, Value: atEmptyPath, ValueTwo: atEmptyPath, Op: "SCMP_CMP_MASKED_EQ"}}},
			// The agent is pid 1: no signal to it, whatever the signal.
			{Names: []string{"kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
				Args: []ociSeccArg{{Index: 0, Value: 1, Op: "SCMP_CMP_EQ"}}},
			// Nor through a pidfd (runsc since 2023 has them), whose target a
			// filter cannot see: an open /proc/1 is one too.
			{Names: []string{"pidfd_send_signal"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm},
		},
	}
	// Nor one sent by I/O readiness (fcntl F_SETOWN + F_SETSIG): a fault
	// signal with a kernel si_code, which the Go runtime crashes on.
	for _, sig := range agentsig.Fault {
		p.Syscalls = append(p.Syscalls, ociSyscallRule{Names: []string{"fcntl"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
			Args: []ociSeccArg{{Index: 1, Value: agentsig.FSetSig, Op: "SCMP_CMP_EQ"}, {Index: 2, Value: uint64(sig), Op: "SCMP_CMP_EQ"}}})
	}
	// No set-uid/set-gid bits on anything: chmod-family modes, and the
	// mode of calls that create (where the files are the host's, in the
	// write-in-place mode without protect_config).
	for _, bit := range []uint64{0o4000, 0o2000} {
		for _, m := range []struct {
			names []string
			arg   uint
		}{
			{[]string{"chmod", "fchmod", "creat", "mkdir", "mknod"}, 1},
			{[]string{"fchmodat", "mkdirat", "mknodat"}, 2},
		} {
			p.Syscalls = append(p.Syscalls, ociSyscallRule{Names: m.names, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
				Args: []ociSeccArg{{Index: m.arg, Value: bit, ValueTwo: bit, Op: "SCMP_CMP_MASKED_EQ"}}})
		}
		for _, o := range []struct {
			name        string
			flags, mode uint
		}{{"open", 1, 2}, {"openat", 2, 3}} {
			p.Syscalls = append(p.Syscalls, ociSyscallRule{Names: []string{o.name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
				Args: []ociSeccArg{
					{Index: o.flags, Value: oCreat, ValueTwo: oCreat, Op: "SCMP_CMP_MASKED_EQ"},
					{Index: o.mode, Value: bit, ValueTwo: bit, Op: "SCMP_CMP_MASKED_EQ"},
				}})
		}
	}
	for _, f := range cloneNewFlags {
		for _, name := range []string{"clone", "unshare"} {
			p.Syscalls = append(p.Syscalls, ociSyscallRule{Names: []string{name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &eperm,
				Args: []ociSeccArg{{Index: 0, Value: f, ValueTwo: f, Op: "SCMP_CMP_MASKED_EQ"}}})
		}
	}
	return p
}
