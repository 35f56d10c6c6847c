package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

// sandboxState is what Cleanup needs to undo a sandbox whose host process
// died: the placeholders it created in the workspace.
type sandboxState struct {
	Placeholders []placeholder `json:"placeholders"`
}

func (b *Backend) statePath(id string) string {
	return filepath.Join(b.cfg.StateDir, id+".json")
}

func (b *Backend) writeState(id string, ph []placeholder) error {
	if err := os.MkdirAll(b.cfg.StateDir, 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(sandboxState{Placeholders: ph})
	if err != nil {
		return err
	}
	tmp := b.statePath(id) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, b.statePath(id))
}

func (b *Backend) removeState(id string) {
	_ = os.Remove(b.statePath(id))
}

// Cleanup removes leftovers of sandboxes not in keep: state (and the
// placeholders it lists) and cgroups under our parent (killing what is
// still in them). Idempotent.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	var errs []error
	if ents, err := os.ReadDir(b.cfg.StateDir); err == nil {
		for _, e := range ents {
			id, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || keep[id] {
				continue
			}
			data, err := os.ReadFile(filepath.Join(b.cfg.StateDir, e.Name()))
			if err == nil {
				var st sandboxState
				if json.Unmarshal(data, &st) == nil {
					if err := removePlaceholders(st.Placeholders); err != nil {
						errs = append(errs, err)
					}
				}
			}
			b.removeState(id)
		}
	}
	h := hostCgroups()
	parents := []string{}
	if p := h.v2Parent(b.cfg.CgroupParent); p != "" {
		parents = append(parents, p)
	}
	for c := range h.v1Mount {
		parents = append(parents, h.v1Parent(c, b.cfg.CgroupParent))
	}
	for _, p := range parents {
		ents, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || keep[e.Name()] || !validSandboxID(e.Name()) {
				continue
			}
			dir := filepath.Join(p, e.Name())
			if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
				killProcs(filepath.Join(dir, "cgroup.procs"))
			}
			if err := rmdirRetry(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("native cleanup: %w", errors.Join(append(errs, sandbox.ErrUnavailable)...))
	}
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
		p.Details["cgroup_note"] = "limits need cgroup controllers: " + f.CgroupReason
	}
	if hint := cgroupTuningHint(f.CgroupVersion); hint != "" {
		p.Details["cgroup_tuning"] = hint
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
