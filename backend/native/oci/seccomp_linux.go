package oci

//go:generate sh gensysnum.sh

import (
	"fmt"
	"runtime"
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// A container's own seccomp profile (config.json linux.seccomp, as Docker
// and containerd write it) is compiled here into a second classic BPF
// program installed on top of Airlock's floor: the kernel runs both and
// the stricter answer wins, so the profile can narrow the floor but never
// widen it.

var nativeArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64}

// actionRank orders actions from most to least restrictive: when several
// rules of one syscall match, the first in this order wins (the kernel's
// own precedence between stacked filters).
var actionRank = map[specs.LinuxSeccompAction]int{
	specs.ActKillProcess: 0, specs.ActKill: 1, specs.ActKillThread: 1, specs.ActTrap: 2,
	specs.ActErrno: 3, specs.ActTrace: 3, specs.ActLog: 5, specs.ActAllow: 6,
}

// actionValue is the filter's return value for act.
func actionValue(act specs.LinuxSeccompAction, errno *uint, defErrno *uint) (uint32, error) {
	e := uint32(unix.EPERM)
	if errno != nil {
		e = uint32(*errno)
	} else if defErrno != nil {
		e = uint32(*defErrno)
	}
	switch act {
	case specs.ActKillProcess:
		return unix.SECCOMP_RET_KILL_PROCESS, nil
	case specs.ActKill, specs.ActKillThread:
		return unix.SECCOMP_RET_KILL_THREAD, nil
	case specs.ActTrap:
		return unix.SECCOMP_RET_TRAP, nil
	case specs.ActErrno:
		return unix.SECCOMP_RET_ERRNO | (e & unix.SECCOMP_RET_DATA), nil
	case specs.ActTrace:
		// No tracer is attached to a container: the call fails as
		// ptrace-less kernels make it fail.
		return unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS), nil
	case specs.ActLog:
		return unix.SECCOMP_RET_LOG, nil
	case specs.ActAllow:
		return unix.SECCOMP_RET_ALLOW, nil
	case specs.ActNotify:
		return 0, fmt.Errorf("action %s: a seccomp listener outside the runtime is not supported", act)
	}
	return 0, fmt.Errorf("unknown action %q", act)
}

type bpfProg struct{ prog []unix.SockFilter }

func (b *bpfProg) stmt(code uint16, k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

func (b *bpfProg) jump(op uint16, k uint32, jt, jf uint8) {
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k, Jt: jt, Jf: jf})
}

func (b *bpfProg) ld(off uint32) { b.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (b *bpfProg) ret(v uint32)  { b.stmt(unix.BPF_RET|unix.BPF_K, v) }

// compileSeccomp turns a container's seccomp profile into a filter. Nil
// or an allow-everything profile yields nil (the floor alone applies).
func compileSeccomp(s *specs.LinuxSeccomp) ([]unix.SockFilter, error) {
	if s == nil {
		return nil, nil
	}
	if s.ListenerPath != "" {
		return nil, fmt.Errorf("seccomp listenerPath %q: a listener outside the runtime is not supported", s.ListenerPath)
	}
	arch, ok := nativeArch[runtime.GOARCH]
	if !ok || len(syscallNumbers) == 0 {
		return nil, fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
	}
	def, err := actionValue(s.DefaultAction, nil, s.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp defaultAction: %w", err)
	}
	byNr, err := seccompRules(s, def)
	if err != nil {
		return nil, err
	}
	if len(byNr) == 0 && def == unix.SECCOMP_RET_ALLOW {
		return nil, nil
	}
	nrs := make([]int, 0, len(byNr))
	for nr := range byNr {
		nrs = append(nrs, nr)
	}
	sort.Ints(nrs)
	var b bpfProg
	b.ld(4) // arch
	b.jump(unix.BPF_JEQ, arch, 1, 0)
	b.ret(def) // another ABI: the floor kills it anyway
	b.ld(0)    // nr
	for _, nr := range nrs {
		body := syscallBody(byNr[nr], def)
		if len(body.prog) > 255 {
			return nil, fmt.Errorf("seccomp: too many rules for syscall %d", nr)
		}
		b.jump(unix.BPF_JEQ, uint32(nr), 0, uint8(len(body.prog)))
		b.prog = append(b.prog, body.prog...)
	}
	b.ret(def)
	if len(b.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program too long (%d instructions)", len(b.prog))
	}
	return b.prog, nil
}

// seccompRule is one profile entry's rule for one syscall.
type seccompRule struct {
	rank int
	ret  uint32
	args []specs.LinuxSeccompArg
}

// seccompRules checks the profile's syscall entries and groups the rules
// that differ from the default action by syscall number (names this
// architecture has no number for are skipped).
func seccompRules(s *specs.LinuxSeccomp, def uint32) (map[int][]seccompRule, error) {
	byNr := map[int][]seccompRule{}
	for i, sc := range s.Syscalls {
		ret, err := actionValue(sc.Action, sc.ErrnoRet, s.DefaultErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp syscalls[%d]: %w", i, err)
		}
		for _, a := range sc.Args {
			if a.Index > 5 {
				return nil, fmt.Errorf("seccomp syscalls[%d]: argument index %d out of range", i, a.Index)
			}
			if _, ok := argOps[a.Op]; !ok {
				return nil, fmt.Errorf("seccomp syscalls[%d]: unknown operator %q", i, a.Op)
			}
		}
		if ret == def && len(sc.Args) == 0 {
			continue
		}
		for _, name := range sc.Names {
			nr, ok := syscallNumbers[name]
			if !ok {
				continue // a call of another architecture or a newer kernel
			}
			byNr[nr] = append(byNr[nr], seccompRule{rank: actionRank[sc.Action], ret: ret, args: sc.Args})
		}
	}
	return byNr, nil
}

// syscallBody is the filter code for one syscall's rules, most
// restrictive action first, ending in the default action.
func syscallBody(rules []seccompRule, def uint32) bpfProg {
	sort.SliceStable(rules, func(i, j int) bool { return rules[i].rank < rules[j].rank })
	var body bpfProg
	for _, r := range rules {
		var conds bpfProg
		for _, a := range r.args {
			argCheck(&conds, a)
		}
		// Each check jumps past the rule's return when it fails: a
		// jump offset of "fail" is patched to the end of the rule.
		end := len(conds.prog) + 1
		for i := range conds.prog {
			in := &conds.prog[i]
			if in.Code&0x07 == unix.BPF_JMP && in.Code&0xf0 != unix.BPF_JA {
				if in.Jt == failMark {
					in.Jt = uint8(end - i - 1)
				}
				if in.Jf == failMark {
					in.Jf = uint8(end - i - 1)
				}
			}
		}
		body.prog = append(body.prog, conds.prog...)
		body.ret(r.ret)
	}
	body.ret(def)
	return body
}

// failMark marks a jump to the end of the rule being built.
const failMark = 0xff

var argOps = map[specs.LinuxSeccompOperator]bool{
	specs.OpEqualTo: true, specs.OpNotEqual: true, specs.OpLessThan: true, specs.OpLessEqual: true,
	specs.OpGreaterThan: true, specs.OpGreaterEqual: true, specs.OpMaskedEqual: true,
}

// argCheck appends the test of one 64-bit argument condition, in 32-bit
// halves: falling through means it holds, failMark jumps mean it does not.
func argCheck(b *bpfProg, a specs.LinuxSeccompArg) {
	lo := uint32(16 + 8*a.Index)
	hi := lo + 4
	vHi, vLo := uint32(a.Value>>32), uint32(a.Value)
	switch a.Op {
	case specs.OpEqualTo:
		b.ld(hi)
		b.jump(unix.BPF_JEQ, vHi, 0, failMark)
		b.ld(lo)
		b.jump(unix.BPF_JEQ, vLo, 0, failMark)
	case specs.OpNotEqual:
		// holds unless both halves are equal
		b.ld(hi)
		b.jump(unix.BPF_JEQ, vHi, 0, 2) // differs: skip to the end (holds)
		b.ld(lo)
		b.jump(unix.BPF_JEQ, vLo, failMark, 0)
	case specs.OpMaskedEqual:
		mHi, mLo := vHi, vLo
		tHi, tLo := uint32(a.ValueTwo>>32), uint32(a.ValueTwo)
		b.ld(hi)
		b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, mHi)
		b.jump(unix.BPF_JEQ, tHi, 0, failMark)
		b.ld(lo)
		b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, mLo)
		b.jump(unix.BPF_JEQ, tLo, 0, failMark)
	case specs.OpGreaterThan, specs.OpGreaterEqual, specs.OpLessThan, specs.OpLessEqual:
		// hi > vHi decides (true for >, >=); hi == vHi: compare lo.
		gt := a.Op == specs.OpGreaterThan || a.Op == specs.OpGreaterEqual
		loOp := uint16(unix.BPF_JGT)
		if a.Op == specs.OpGreaterEqual || a.Op == specs.OpLessThan {
			loOp = unix.BPF_JGE
		}
		b.ld(hi)
		if gt {
			b.jump(unix.BPF_JGT, vHi, 3, 0) // greater: holds (skip the lo test)
			b.jump(unix.BPF_JEQ, vHi, 0, failMark)
			b.ld(lo)
			b.jump(loOp, vLo, 0, failMark)
		} else {
			b.jump(unix.BPF_JGT, vHi, failMark, 0)
			b.jump(unix.BPF_JEQ, vHi, 0, 2) // less: holds
			b.ld(lo)
			// lo < vLo  == !(lo >= vLo); lo <= vLo == !(lo > vLo)
			b.jump(loOp, vLo, failMark, 0)
		}
	}
}
