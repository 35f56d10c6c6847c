package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/sandbox"
)

// Each live sandbox holds an exclusive flock on StateDir/<id>.lock for as
// long as its host process lives: the kernel drops it when that process
// dies, however it dies (SIGKILL included). A lock file nobody holds is a
// dead sandbox's, whose cgroups are reclaimed by the next create or by
// Cleanup: by lock, never by guessing from names or ages.

func (b *Backend) lockPath(id string) string {
	return filepath.Join(b.cfg.StateDir, id+".lock")
}

// lockState creates and locks the sandbox's lock file. It is created
// under a temporary name and renamed once locked, so that no reclaimer
// ever finds it unlocked.
func (b *Backend) lockState(id string) (*os.File, error) {
	if err := os.MkdirAll(b.cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	tmp := filepath.Join(b.cfg.StateDir, "."+id+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, b.lockPath(id)); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// unlockState removes the lock file (still holding the lock) and closes it.
func (b *Backend) unlockState(id string, f *os.File) {
	if f == nil {
		return
	}
	_ = os.Remove(b.lockPath(id))
	f.Close()
}

// reclaimStale removes what dead sandboxes left: the cgroups of every
// lock file no live process holds, and the lock files. It returns the IDs
// reclaimed.
func (b *Backend) reclaimStale() []string {
	ents, err := os.ReadDir(b.cfg.StateDir)
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !sandbox.ValidID(id) {
			continue
		}
		if b.reclaim(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// reclaim takes a dead sandbox's lock and removes its cgroups and lock
// file; it reports false when the sandbox is alive (its lock is held).
func (b *Backend) reclaim(id string) bool {
	f, err := os.OpenFile(b.lockPath(id), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // alive
	}
	b.removeCgroups(id)
	_ = fsutil.RemoveAll(filepath.Join(b.cfg.WritableDir, id)) // an image sandbox's writable layer
	// Only remove the file we locked: another reclaimer may have removed
	// it and a new sandbox cannot reuse the name (IDs are unique).
	var a, c unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(b.lockPath(id), &c) == nil && a.Ino == c.Ino && a.Dev == c.Dev {
		_ = os.Remove(b.lockPath(id))
	}
	return true
}

// removeCgroups kills what is left in sandbox id's cgroups and removes them.
func (b *Backend) removeCgroups(id string) error {
	var errs []error
	for _, p := range b.cgroupParents() {
		dir := filepath.Join(p, id)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			killProcs(filepath.Join(dir, "cgroup.procs"))
		}
		if err := rmdirRetry(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b *Backend) cgroupParents() []string {
	h := hostCgroups()
	var parents []string
	if p := h.v2Parent(b.cfg.CgroupParent); p != "" {
		parents = append(parents, p)
	}
	for c := range h.v1Mount {
		parents = append(parents, h.v1Parent(c, b.cfg.CgroupParent))
	}
	return parents
}

// Cleanup removes leftovers of sandboxes not in keep: dead sandboxes'
// lock files, and every cgroup under our parent (killing what is still in
// them) whose sandbox is neither kept nor alive. Earlier versions left
// placeholder files in workspaces and listed them in <id>.json: those are
// removed too while still ours. Idempotent.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	var errs []error
	if ents, err := os.ReadDir(b.cfg.StateDir); err == nil {
		for _, e := range ents {
			name := e.Name()
			if id, ok := strings.CutSuffix(name, ".json"); ok && !keep[id] {
				if err := removeLegacyState(filepath.Join(b.cfg.StateDir, name)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	b.reclaimStale()
	alive := map[string]bool{}
	if ents, err := os.ReadDir(b.cfg.StateDir); err == nil {
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".lock"); ok {
				alive[id] = true
			}
		}
	}
	for _, p := range b.cgroupParents() {
		ents, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range ents {
			id := e.Name()
			if !e.IsDir() || keep[id] || alive[id] || !sandbox.ValidID(id) {
				continue
			}
			dir := filepath.Join(p, id)
			if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
				killProcs(filepath.Join(dir, "cgroup.procs"))
			}
			if err := rmdirRetry(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := imageroot.Sweep(b.cfg.WritableDir, keep, func(id string) bool { return alive[id] }); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("native cleanup: %w", errors.Join(append(errs, sandbox.ErrUnavailable)...))
	}
	return nil
}

// removeLegacyState removes the workspace placeholders an earlier version
// recorded in a state file, then the file.
func removeLegacyState(file string) error {
	data, err := os.ReadFile(file)
	if err == nil {
		var st struct {
			Placeholders []hostfs.Placeholder `json:"placeholders"`
		}
		if json.Unmarshal(data, &st) == nil {
			if err := hostfs.RemovePlaceholders(st.Placeholders); err != nil {
				return err
			}
		}
	}
	_ = os.Remove(file)
	return nil
}

// Probe reports whether the native backend can run here.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	f := HostFeatures()
	p := sandbox.Probe{Available: true, Isolation: "kernel", Details: map[string]string{
		"user_namespaces":    fmt.Sprint(f.UserNamespaces),
		"landlock_abi":       fmt.Sprint(f.LandlockABI),
		"seccomp":            fmt.Sprint(f.Seccomp && f.SeccompArch),
		"seccomp_notify":     fmt.Sprint(f.SeccompUserNotif),
		"write_mediation":    fmt.Sprint(f.SeccompAddFD),
		"cgroup":             f.CgroupVersion,
		"cgroup_controllers": strings.Join(f.CgroupControllers, ","),
		"rootless":           fmt.Sprint(f.Rootless),
	}}
	var why []string
	if !f.UserNamespaces {
		why = append(why, "user namespaces: "+f.UserNamespacesReason)
	}
	if f.LandlockABI == 0 {
		why = append(why, "no Landlock (kernel >= 5.13 with lsm=landlock; or allow_degraded)")
	}
	if !f.Seccomp || !f.SeccompArch {
		why = append(why, "no seccomp filter for this kernel/architecture (or allow_degraded)")
	}
	if !f.UserNamespaces || f.LandlockABI == 0 || !f.Seccomp || !f.SeccompArch {
		p.Available = false
	}
	if len(why) > 0 {
		p.Reason = strings.Join(why, "; ")
	}
	if p.Available && f.CgroupReason != "" {
		p.Details["cgroup_note"] = "limits need cgroup controllers: " + f.CgroupReason + " (airlock doctor tries them)"
	}
	if hint := cgroupTuningHint(f.CgroupVersion); hint != "" {
		p.Details["cgroup_tuning"] = hint
	}
	return p
}

// Diagnose is Probe plus what only doctor pays for: whether this caller's
// runs can enforce limits, found by making a cgroup the way a run does
// (Probe stays cheap: `--backend auto` calls it on every run).
func (b *Backend) Diagnose(ctx context.Context) sandbox.Probe {
	p := b.Probe(ctx)
	if !p.Available {
		return p
	}
	delete(p.Details, "cgroup_note")
	var enforced bool
	p.Details["limits"], enforced = limitsVerdict(b.cfg.CgroupParent, HostFeatures().CgroupVersion)
	if !enforced {
		// Available (a run without limits works), with the caveat
		// first: it is what every default run trips on.
		p.Reason = "memory, pids and cpus limits cannot be enforced for this user: see limits"
	}
	return p
}

// cgroupTuningHint says how to avoid the RCU grace period that every v1
// cgroup join waits for (5-15 ms of start-up measured here): with a cgroup2
// mount that favours dynamic modifications, the kernel keeps the threadgroup
// lock in its slow-reader mode. Airlock never changes host mounts itself.
func cgroupTuningHint(version string) string {
	if version == "v2" {
		return "" // v2 joins at clone (CLONE_INTO_CGROUP): nothing to wait for
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "cgroup2" {
			if strings.Contains(","+f[3]+",", ",favordynmods,") {
				return ""
			}
			return "v1 cgroup joins wait for an RCU grace period on every sandbox start; " +
				"`mount -o remount,favordynmods " + f[1] + "` removes that wait (see docs/performance.md)"
		}
	}
	return ""
}
