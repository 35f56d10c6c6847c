package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
)

// cgroupLimits is what a sandbox's cgroup must enforce (zero: no limit).
type cgroupLimits = cgroupfs.Limits

// sandboxCgroup is one sandbox's cgroup: a cgroup2 directory (process
// tracking, cgroup.kill, and the controllers it offers) and/or v1
// controller directories for what cgroup2 does not provide (hybrid hosts).
type sandboxCgroup struct {
	v2Dir  string            // "" when no cgroup2 directory was made
	v2FD   int               // open v2Dir for CLONE_INTO_CGROUP, -1 if none
	v1Dirs map[string]string // controller -> directory
	// provider of each limited resource: "v2", "v1" or "" (none).
	memory, pids, cpu string
}

// cgroupMissing describes a controller the policy needs that this host
// does not let us use.
type cgroupMissing struct {
	Controller string
	Why        string
	Field      string // policy field to relax
}

func (m cgroupMissing) String() string {
	flag := "--" + strings.TrimPrefix(m.Field, "limits.")
	return fmt.Sprintf("cgroup %s controller not writable (%s): to run without that limit, pass %s 0 (policy %s: 0), or --allow-degraded", m.Controller, m.Why, flag, m.Field)
}

// missingCgroupError names every controller of ms in one message, with the
// flags that run without those limits and what would let this caller have
// them (the same advice doctor prints).
func missingCgroupError(h cgroupHost, ms []cgroupMissing) string {
	var ctrls, fields, flags []string
	for _, m := range ms {
		ctrls = append(ctrls, m.Controller)
		fields = append(fields, m.Field)
		flags = append(flags, "--"+strings.TrimPrefix(m.Field, "limits.")+" 0")
	}
	msg := fmt.Sprintf("cgroup controller(s) %s not writable for uid %d (%s), so %s cannot be enforced: to run without %s, pass %s (policy %s: 0), or --allow-degraded",
		strings.Join(ctrls, ", "), os.Geteuid(), ms[0].Why, strings.Join(fields, ", "), plural(len(ms), "that limit", "those limits"), strings.Join(flags, " "), strings.Join(fields, ", "))
	if how := cgroupDelegation(h, ctrls); how != "" {
		msg += "; to enforce them, " + how
	}
	return msg
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cgroupDelegation says what gives a caller without root the controllers
// ctrls ("" for root or a host without cgroups).
func cgroupDelegation(h cgroupHost, ctrls []string) string {
	uid := os.Geteuid()
	if uid == 0 {
		return ""
	}
	var dirs []string
	for _, c := range ctrls {
		if d := h.v1Parent(c, ""); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == len(ctrls) {
		// cgroup v1: a directory root gives this user (only the directory:
		// limits root writes in it stay root's and bound the sandboxes).
		return fmt.Sprintf("have root delegate a cgroup per controller: `mkdir -p %s && chown %d %s`", strings.Join(dirs, " "), uid, strings.Join(dirs, " "))
	}
	if h.v2Mount != "" {
		return "run airlock in a systemd scope with delegation: `systemd-run --user --scope -p Delegate=yes airlock run ...`"
	}
	return ""
}

// newCgroup makes the sandbox's cgroup and applies lim. It returns the
// controllers it could not provide; on error nothing is left behind.
func newCgroup(h cgroupHost, parent, id string, lim cgroupLimits) (*sandboxCgroup, []cgroupMissing, error) {
	cg := newCgroupV2(h, parent, id, lim)
	missing, err := cg.finish(h, parent, id, lim)
	if err != nil {
		cg.remove()
		return nil, nil, err
	}
	return cg, missing, nil
}

func needed(lim cgroupLimits) map[string]string {
	need := map[string]string{} // controller -> policy field
	if lim.Memory > 0 {
		need["memory"] = "limits.memory"
	}
	if lim.Pids > 0 {
		need["pids"] = "limits.pids"
	}
	if lim.CPUs > 0 {
		need["cpu"] = "limits.cpus"
	}
	return need
}

// newCgroupV2 makes the cgroup2 directory (process tracking and cgroup.kill
// need no controller; the init joins it at clone time), enabling the
// controllers lim needs where the hierarchy offers them. Best effort: a
// host without a usable cgroup2 gets an empty directory-less cgroup.
func newCgroupV2(h cgroupHost, parent, id string, lim cgroupLimits) *sandboxCgroup {
	cg := &sandboxCgroup{v2FD: -1, v1Dirs: map[string]string{}}
	if p := h.v2Parent(parent); p != "" {
		if dir, err := makeV2(p, id, needed(lim)); err == nil {
			cg.v2Dir = dir
			fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err == nil {
				cg.v2FD = fd
			}
		}
	}
	return cg
}

// finish makes the v1 directories for what cgroup2 does not provide and
// writes the limits. It can run while the init starts (v1 membership is
// written by pid before the init may proceed).
func (cg *sandboxCgroup) finish(h cgroupHost, parent, id string, lim cgroupLimits) (missing []cgroupMissing, err error) {
	why := whyNoCgroup(h)
	need := needed(lim)
	v2ok := map[string]bool{}
	if cg.v2Dir != "" {
		offered := v2Controllers(cg.v2Dir)
		for c := range need {
			if offered[c] {
				v2ok[c] = true
			}
		}
	}
	v1Need := []string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if _, ok := need[c]; !ok {
			continue
		}
		if v2ok[c] {
			cg.setProvider(c, "v2")
			continue
		}
		if _, ok := h.v1Mount[c]; ok {
			v1Need = append(v1Need, c)
			continue
		}
		missing = append(missing, cgroupMissing{c, why, need[c]})
	}
	// For stats only (peak memory, CPU time), best effort: v1 memory when
	// no hierarchy provides it yet, v1 cpuacct when there is no cgroup2 dir
	// (cgroup2's cpu.stat needs no controller).
	if _, ok := need["memory"]; !ok && !v2Controllers(cg.v2Dir)["memory"] {
		if _, ok := h.v1Mount["memory"]; ok {
			v1Need = append(v1Need, "memory")
		}
	}
	if _, ok := h.v1Mount["cpuacct"]; ok && cg.v2Dir == "" {
		v1Need = append(v1Need, "cpuacct")
	}
	for _, c := range v1Need {
		dir := filepath.Join(h.v1Parent(c, parent), id)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			err = os.Mkdir(dir, 0o755)
			if err == nil {
				cg.v1Dirs[c] = dir
				cg.setProvider(c, "v1")
				continue
			}
		}
		if f, ok := need[c]; ok {
			missing = append(missing, cgroupMissing{c, why, f})
		}
	}
	if err := cg.apply(lim); err != nil {
		return nil, err
	}
	return missing, nil
}

func (cg *sandboxCgroup) setProvider(c, p string) {
	switch c {
	case "memory":
		cg.memory = p
	case "pids":
		cg.pids = p
	case "cpu":
		cg.cpu = p
	}
}

// whyNoCgroup explains, for error messages, why a controller may be missing.
func whyNoCgroup(h cgroupHost) string {
	rootless := os.Geteuid() != 0
	switch {
	case h.v2Mount == "" && len(h.v1Mount) == 0:
		return "no cgroup filesystem mounted"
	case rootless && len(h.v1Mount) > 0:
		return "rootless on cgroup v1"
	case rootless:
		return "rootless without a delegated cgroup v2 subtree"
	default:
		return "controller not available"
	}
}

// makeV2 creates parent (enabling the needed controllers in it) and
// parent/id.
func makeV2(parent, id string, need map[string]string) (string, error) {
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	offered := v2Controllers(parent)
	var enable []string
	for c := range need {
		if offered[c] {
			enable = append(enable, "+"+c)
		} else {
			// Ask the grandparent to offer it (works as root when the
			// grandparent holds no processes).
			if os.WriteFile(filepath.Join(filepath.Dir(parent), "cgroup.subtree_control"), []byte("+"+c), 0) == nil {
				enable = append(enable, "+"+c)
			}
		}
	}
	if len(enable) > 0 {
		// Enabling one at a time: one unavailable controller must not
		// block the others.
		for _, e := range enable {
			_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(e), 0)
		}
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

func writeCg(dir, file, val string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// apply writes the limits to whichever hierarchy provides each one.
func (cg *sandboxCgroup) apply(lim cgroupLimits) error {
	return cgroupfs.Apply(cgroupfs.Placement{
		V2Dir: cg.v2Dir, V1Dirs: cg.v1Dirs,
		Memory: cgroupfs.Hierarchy(cg.memory), Pids: cgroupfs.Hierarchy(cg.pids), CPU: cgroupfs.Hierarchy(cg.cpu),
	}, lim)
}

// joinV1 moves pid into every v1 directory (v2 joins at clone time).
func (cg *sandboxCgroup) joinV1(pid int) error {
	for c, d := range cg.v1Dirs {
		if err := writeCg(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("join %s cgroup: %w", c, err)
		}
	}
	return nil
}

// kill ends every process in the cgroup.
func (cg *sandboxCgroup) kill() {
	if cg == nil {
		return
	}
	if cg.v2Dir != "" {
		if writeCg(cg.v2Dir, "cgroup.kill", "1") == nil {
			return
		}
		killProcs(filepath.Join(cg.v2Dir, "cgroup.procs"))
	}
	for _, d := range cg.v1Dirs {
		killProcs(filepath.Join(d, "cgroup.procs"))
	}
}

// killProcs SIGKILLs every pid listed in a cgroup.procs file, a few rounds
// (forks racing the loop are caught by the next round; the pids limit and
// the pid namespace bound the race).
func killProcs(procs string) {
	for round := 0; round < 10; round++ {
		b, err := os.ReadFile(procs)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// remove kills what is left and removes the directories (retrying while
// exiting processes still populate them).
func (cg *sandboxCgroup) remove() error {
	if cg == nil {
		return nil
	}
	if cg.v2FD >= 0 {
		unix.Close(cg.v2FD)
		cg.v2FD = -1
	}
	dirs := []string{}
	if cg.v2Dir != "" {
		dirs = append(dirs, cg.v2Dir)
	}
	for _, d := range cg.v1Dirs {
		dirs = append(dirs, d)
	}
	var errs []error
	for _, d := range dirs {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
	}
	cg.v2Dir = ""
	cg.v1Dirs = map[string]string{}
	return errors.Join(errs...)
}

// rmdirRetry removes a cgroup directory, killing what still populates it.
func rmdirRetry(d string) error {
	return cgroupfs.Remove(d, func(dir string) { killProcs(filepath.Join(dir, "cgroup.procs")) })
}

// cgroupStats is what the cgroup reports about resource use.
type cgroupStats struct {
	MemoryBytes, MemoryPeak, CPUNanos int64
	Pids                              int
	OOMKills                          int64
}

// oomKills reads only the OOM-kill counter (one file: it is read before
// every exec, on the request path).
func (cg *sandboxCgroup) oomKills() int64 {
	if cg == nil {
		return 0
	}
	switch cg.memory {
	case "v2":
		return cgroupfs.ReadKey(cg.v2Dir, "memory.events", "oom_kill")
	case "v1":
		return cgroupfs.ReadKey(cg.v1Dirs["memory"], "memory.oom_control", "oom_kill")
	}
	return 0
}

func (cg *sandboxCgroup) stats() cgroupStats {
	var s cgroupStats
	if cg == nil {
		return s
	}
	switch cg.memory {
	case "v2":
		s.MemoryBytes = cgroupfs.ReadInt(cg.v2Dir, "memory.current")
		s.MemoryPeak = cgroupfs.ReadInt(cg.v2Dir, "memory.peak")
		s.OOMKills = cgroupfs.ReadKey(cg.v2Dir, "memory.events", "oom_kill")
	case "v1":
		d := cg.v1Dirs["memory"]
		s.MemoryBytes = cgroupfs.ReadInt(d, "memory.usage_in_bytes")
		s.MemoryPeak = cgroupfs.ReadInt(d, "memory.max_usage_in_bytes")
		s.OOMKills = cgroupfs.ReadKey(d, "memory.oom_control", "oom_kill")
	}
	switch cg.pids {
	case "v2":
		s.Pids = int(cgroupfs.ReadInt(cg.v2Dir, "pids.current"))
	case "v1":
		s.Pids = int(cgroupfs.ReadInt(cg.v1Dirs["pids"], "pids.current"))
	}
	if d, ok := cg.v1Dirs["cpuacct"]; ok {
		s.CPUNanos = cgroupfs.ReadInt(d, "cpuacct.usage")
	} else if cg.v2Dir != "" {
		s.CPUNanos = cgroupfs.ReadKey(cg.v2Dir, "cpu.stat", "usage_usec") * 1000
	}
	return s
}

// probeLimits tries, as a run would, to make a cgroup enforcing a memory,
// pids and CPU limit under parent, removes it, and returns what could not
// be enforced for this caller: doctor reports the run path's own verdict,
// not a guess from permissions.
func probeLimits(parent string) []cgroupMissing {
	h := hostCgroups()
	cg, missing, err := newCgroup(h, parent, "doctor-"+strconv.Itoa(os.Getpid()), cgroupLimits{Memory: 64 << 20, Pids: 64, CPUs: 1})
	if err != nil {
		return []cgroupMissing{{Controller: "memory, pids, cpu", Why: err.Error(), Field: "limits.memory"}}
	}
	_ = cg.remove()
	return missing
}

// limitsVerdict is doctor's line on the limits for this caller.
func limitsVerdict(parent, version string) (string, bool) {
	missing := probeLimits(parent)
	if len(missing) == 0 {
		return fmt.Sprintf("memory, pids and cpus limits enforced for uid %d (cgroup %s)", os.Geteuid(), version), true
	}
	return "NOT ENFORCED: every run with a limit fails (the coding-agent and default policies set all three): " + missingCgroupError(hostCgroups(), missing), false
}
