package oci

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// run evaluates a compiled filter on one call, as the kernel would (the
// VM loads words big-endian, so seccomp_data is laid out that way here).
func run(t *testing.T, prog []unix.SockFilter, arch uint32, nr int, args ...uint64) uint32 {
	t.Helper()
	raw := make([]bpf.Instruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}.Disassemble()
	}
	vm, err := bpf.NewVM(raw)
	if err != nil {
		t.Fatalf("filter does not verify: %v", err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))       // low word
		binary.BigEndian.PutUint32(data[16+8*i+4:], uint32(a>>32)) // high word
	}
	out, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(out)
}

const dockerLike = `{
 "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
 "syscalls": [
  {"names": ["read", "write", "exit_group", "no_such_call_on_this_arch"], "action": "SCMP_ACT_ALLOW"},
  {"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]},
  {"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
  {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
  {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
  {"names": ["getpid"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 4294967296, "op": "SCMP_CMP_GE"}]},
  {"names": ["getppid"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 5, "op": "SCMP_CMP_NE"}]},
  {"names": ["gettid"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_LT"}]},
  {"names": ["kill"], "action": "SCMP_ACT_KILL_PROCESS"}
 ]}`

func TestCompileSeccomp(t *testing.T) {
	var s specs.LinuxSeccomp
	if err := json.Unmarshal([]byte(dockerLike), &s); err != nil {
		t.Fatal(err)
	}
	prog, err := compileSeccomp(&s)
	if err != nil {
		t.Fatal(err)
	}
	x86 := uint32(unix.AUDIT_ARCH_X86_64)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | 1)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	for _, c := range []struct {
		name string
		nr   int
		args []uint64
		want uint32
	}{
		{"read allowed", unix.SYS_READ, nil, allow},
		{"unlisted call: default errno", unix.SYS_MOUNT, nil, eperm},
		{"personality(0)", unix.SYS_PERSONALITY, []uint64{0}, allow},
		{"personality(8)", unix.SYS_PERSONALITY, []uint64{8}, allow},
		{"personality(0xffffffff)", unix.SYS_PERSONALITY, []uint64{0xffffffff}, eperm},
		{"personality high word", unix.SYS_PERSONALITY, []uint64{1 << 32}, eperm},
		{"clone without namespace flags", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone(CLONE_NEWUSER)", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"clone3 answers ENOSYS", unix.SYS_CLONE3, nil, unix.SECCOMP_RET_ERRNO | 38},
		{"GE 64-bit: above", unix.SYS_GETPID, []uint64{0, 1<<32 + 1}, allow},
		{"GE 64-bit: equal", unix.SYS_GETPID, []uint64{0, 1 << 32}, allow},
		{"GE 64-bit: below", unix.SYS_GETPID, []uint64{0, 1<<32 - 1}, eperm},
		{"NE: different", unix.SYS_GETPPID, []uint64{6}, allow},
		{"NE: equal", unix.SYS_GETPPID, []uint64{5}, eperm},
		{"NE: high word differs", unix.SYS_GETPPID, []uint64{5 | 1<<32}, allow},
		{"LT: below", unix.SYS_GETTID, []uint64{9}, allow},
		{"LT: equal", unix.SYS_GETTID, []uint64{10}, eperm},
		{"LT: high word", unix.SYS_GETTID, []uint64{1 << 32}, eperm},
		{"kill process", unix.SYS_KILL, nil, unix.SECCOMP_RET_KILL_PROCESS},
	} {
		if got := run(t, prog, x86, c.nr, c.args...); got != c.want {
			t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
		}
	}
	// Another ABI gets the default (the floor kills it).
	if got := run(t, prog, unix.AUDIT_ARCH_I386, unix.SYS_READ); got != eperm {
		t.Errorf("i386 read: %#x", got)
	}
}

func TestCompileSeccompRefuses(t *testing.T) {
	for name, js := range map[string]string{
		"notify action":  `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_NOTIFY"}]}`,
		"listener":       `{"defaultAction":"SCMP_ACT_ALLOW","listenerPath":"/run/x.sock"}`,
		"bad operator":   `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":1,"op":"SCMP_CMP_XX"}]}]}`,
		"bad arg index":  `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}`,
		"unknown action": `{"defaultAction":"SCMP_ACT_WHATEVER"}`,
	} {
		var s specs.LinuxSeccomp
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := compileSeccomp(&s); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
	// Allow-everything profiles add no filter.
	if p, err := compileSeccomp(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow}); err != nil || p != nil {
		t.Errorf("allow-all: %v %v", p, err)
	}
}

func FuzzCompileSeccomp(f *testing.F) {
	f.Add([]byte(dockerLike))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s specs.LinuxSeccomp
		if json.Unmarshal(data, &s) != nil {
			return
		}
		prog, err := compileSeccomp(&s)
		if err != nil || prog == nil {
			return
		}
		if len(prog) > unix.BPF_MAXINSNS {
			t.Fatalf("program of %d instructions", len(prog))
		}
		run(t, prog, unix.AUDIT_ARCH_X86_64, unix.SYS_READ, 1, 2, 3)
	})
}
