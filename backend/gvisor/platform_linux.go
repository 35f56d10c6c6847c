package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// missingRunsc says how to get runsc.
const missingRunsc = "install it: `make deps` builds the pinned runsc (scripts/runsc.sh) into /usr/local/bin; Debian's package runsc (apt-get install runsc) is an old fallback"

// discover asks runsc at cfg.Runsc what it is and offers: its version, its
// platforms and, where KVM could be used, whether it works.
func discover(ctx context.Context, cfg Config) Info {
	var info Info
	_, err := os.Stat("/dev/kvm")
	info.KVMDevice = err == nil
	p, err := exec.LookPath(cfg.Runsc)
	if err != nil {
		info.Err = fmt.Errorf("runsc %q not found (%s): %w", cfg.Runsc, missingRunsc, sandbox.ErrUnavailable)
		return info
	}
	info.Path = p
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "--version").Output()
	if err != nil {
		info.Err = fmt.Errorf("runsc %s --version: %v: %w", p, err, sandbox.ErrUnavailable)
		return info
	}
	info.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	flags := runscFlags(ctx, p)
	info.Platforms = parsePlatforms(flags)
	info.overlayDir = overlayDirPrefix(flags)
	if cfg.Platform == PlatformAuto && os.Geteuid() == 0 {
		info.kvmWorks, info.KVM = kvmCheck(ctx, p, info.Platforms, info.KVMDevice, hypervisorGuest())
	}
	info.Platform, info.Err = choosePlatform(cfg.Platform, info.Platforms, kvmState{Device: info.KVMDevice, Works: info.kvmWorks})
	if info.Err == nil && os.Geteuid() != 0 {
		info.Err = fmt.Errorf("runsc needs root to create sandboxes (rootless runsc cannot apply cgroup limits): %w", sandbox.ErrUnavailable)
	}
	return info
}

// runscFlags returns the text of `runsc flags`: the platforms built in
// are named in the -platform flag's description (runsc has no command
// that lists them), and the -overlay2 syntax differs between versions.
func runscFlags(ctx context.Context, p string) string {
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, p, "flags")
	cmd.Stdout, cmd.Stderr = &buf, &buf
	_ = cmd.Run() // exits 0 or 2 depending on the version; the text is what counts
	return buf.String()
}

// overlayDirPrefix is what runsc wants before a directory in
// --overlay2=all:MEDIUM: "dir=" since 2023 (its help names 'dir=/abs/dir/path'),
// nothing before.
func overlayDirPrefix(flags string) string {
	if strings.Contains(flags, "'dir=") {
		return "dir="
	}
	return ""
}

var platformFlag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*-platform\s.*\n\s*(.*)$`) })

// parsePlatforms reads the platform names from `runsc flags` output, e.g.
// "specifies which platform to use: ptrace (default), kvm.".
func parsePlatforms(flags string) []string {
	m := platformFlag().FindStringSubmatch(flags)
	if m == nil {
		return nil
	}
	_, list, ok := strings.Cut(m[1], ":")
	if !ok {
		return nil
	}
	var out []string
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '.' || r == ' ' || r == '(' || r == ')' }) {
		switch f {
		case PlatformPtrace, PlatformSystrap, PlatformKVM:
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// kvmState is what choosePlatform knows of KVM here.
type kvmState struct {
	Device bool // /dev/kvm exists
	Works  bool // kvmCheck ran a sandbox on it
}

// choosePlatform picks the platform: the one asked for if this runsc and
// host have it; automatically kvm where kvmCheck found it working, else
// systrap, else ptrace.
func choosePlatform(want string, have []string, kvm kvmState) (string, error) {
	if len(have) == 0 {
		have = []string{PlatformPtrace} // every runsc has ptrace
	}
	switch want {
	case PlatformAuto:
		if kvm.Works && kvm.Device && slices.Contains(have, PlatformKVM) {
			return PlatformKVM, nil
		}
		if slices.Contains(have, PlatformSystrap) {
			return PlatformSystrap, nil
		}
		if slices.Contains(have, PlatformPtrace) {
			return PlatformPtrace, nil
		}
		return "", fmt.Errorf("runsc offers no usable platform (has %s): %w", strings.Join(have, ", "), sandbox.ErrUnavailable)
	case PlatformPtrace, PlatformSystrap, PlatformKVM:
		if !slices.Contains(have, want) {
			return "", fmt.Errorf("runsc platform %q not built into this runsc (has %s): %w", want, strings.Join(have, ", "), sandbox.ErrUnavailable)
		}
		if want == PlatformKVM && !kvm.Device {
			return "", fmt.Errorf("runsc platform kvm needs /dev/kvm: %w", sandbox.ErrUnavailable)
		}
		return want, nil
	default:
		return "", fmt.Errorf("runsc platform %q unknown (ptrace, systrap, kvm): %w", want, sandbox.ErrInvalid)
	}
}

// hypervisorGuest reports whether this host is itself a virtual machine
// (the CPU's hypervisor flag).
func hypervisorGuest() bool {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "flags" {
			return slices.Contains(strings.Fields(v), "hypervisor")
		}
	}
	return false
}

// kvmTrialTimeout bounds the trial sandbox on the kvm platform: a runsc
// whose KVM platform does not work on a host may spin instead of failing.
var kvmTrialTimeout = 20 * time.Second

// kvmCheck decides whether the kvm platform is chosen automatically: only
// on a host that is no virtual machine itself (nested, gVisor's KVM
// platform is slower than systrap, and old runsc hung there), with
// /dev/kvm, and once a trial `runsc do /bin/true` on it has worked. It
// returns the verdict and the reason, for doctor.
func kvmCheck(ctx context.Context, runsc string, have []string, device, guest bool) (bool, string) {
	switch {
	case !slices.Contains(have, PlatformKVM):
		return false, "not built into this runsc"
	case !device:
		return false, "no /dev/kvm"
	case guest:
		return false, "not chosen: this host is a virtual machine (nested KVM is slower than systrap)"
	}
	if err := kvmTrial(ctx, runsc); err != nil {
		return false, "not chosen: a trial sandbox on it failed: " + err.Error()
	}
	return true, "works (a trial sandbox ran on it)"
}

// kvmTrial runs `runsc do /bin/true` on the kvm platform with its own
// state root, bounded by kvmTrialTimeout, and removes what it left.
func kvmTrial(ctx context.Context, runsc string) error {
	root, err := os.MkdirTemp("", "airlock-runsc-kvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ctx, cancel := context.WithTimeout(ctx, kvmTrialTimeout)
	defer cancel()
	args := []string{"--root", root, "--network=none", "--ignore-cgroups", "--platform=kvm"}
	cmd := exec.CommandContext(ctx, runsc, append(args, "do", "/bin/true")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer in %v", kvmTrialTimeout)
	} else if err != nil {
		err = fmt.Errorf("%v: %s", err, lastLine(out.String()))
	}
	if err != nil {
		// What the trial left (a sandbox that hung): removed by its own
		// runsc, each call bounded too.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		ids, _ := exec.CommandContext(dctx, runsc, "--root", root, "list", "--quiet").Output()
		for _, id := range strings.Fields(string(ids)) {
			_ = exec.CommandContext(dctx, runsc, "--root", root, "delete", "--force", id).Run()
		}
	}
	return err
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	if s == "" {
		return "no output"
	}
	return s
}

// environPrivate reports whether this runsc keeps /proc/1/environ from
// the sandbox's processes: those with systrap (2023 and later) refuse it
// to processes that may not ptrace the non-dumpable agent, which none
// may (TestSeccompProfile and the escape suite's agent-environ check it).
func (i Info) environPrivate() bool { return slices.Contains(i.Platforms, PlatformSystrap) }
