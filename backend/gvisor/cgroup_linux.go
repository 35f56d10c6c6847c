package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
	"github.com/airlock-dev/airlock/policy"
)

const cgroupRoot = "/sys/fs/cgroup"

// The backend makes each sandbox's cgroup itself and starts `runsc run`
// inside it with --ignore-cgroups: runsc's own cgroup handling (nine v1
// controllers created, joined and torn down with retries) costs a third of
// a sandbox start, and a cgroup the backend owns outlives runsc, so the OOM
// count and stats can be read after the sandbox died. runsc, its gofer,
// the sentry and every process inside are descendants of `runsc run`, so
// the limits cover all of gVisor.

// cgroupV2 reports whether the host uses the unified hierarchy only.
func cgroupV2() bool {
	_, err := os.Stat(cgroupRoot + "/cgroup.controllers")
	return err == nil
}

// v1Controllers are the cgroup v1 hierarchies a sandbox cgroup is made in.
var v1Controllers = []string{"memory", "cpu", "cpuacct"}

// sandboxCgroup is one sandbox's cgroup (path relative to each hierarchy's
// root).
type sandboxCgroup struct {
	rel string
	v2  bool
}

func newSandboxCgroup(rel string) *sandboxCgroup {
	return &sandboxCgroup{rel: strings.Trim(rel, "/"), v2: cgroupV2()}
}

func (c *sandboxCgroup) path(ctrl string) string {
	if c.v2 {
		return filepath.Join(cgroupRoot, c.rel)
	}
	return filepath.Join(cgroupRoot, ctrl, c.rel)
}

// dirs are the cgroup directories of the sandbox.
func (c *sandboxCgroup) dirs() []string {
	if c.v2 {
		return []string{c.path("")}
	}
	var out []string
	for _, ctrl := range v1Controllers {
		out = append(out, c.path(ctrl))
	}
	return out
}

// create makes the cgroup and applies the policy's memory and CPU limits.
// On error nothing is left.
func (c *sandboxCgroup) create(l policy.Limits) (err error) {
	defer func() {
		if err != nil {
			c.remove()
		}
	}()
	if c.v2 {
		if err := enableV2Controllers(filepath.Dir(c.path(""))); err != nil {
			return err
		}
	}
	for _, d := range c.dirs() {
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	pl := cgroupfs.Placement{V2Dir: c.path(""), Memory: cgroupfs.V2, CPU: cgroupfs.V2}
	if !c.v2 {
		pl = cgroupfs.Placement{V1Dirs: map[string]string{"memory": c.path("memory"), "cpu": c.path("cpu")}, Memory: cgroupfs.V1, CPU: cgroupfs.V1}
	}
	// Pids: gVisor's processes are not host processes; the sandbox gets
	// RLIMIT_NPROC inside instead.
	return cgroupfs.Apply(pl, cgroupfs.Limits{Memory: int64(l.Memory), CPUs: l.CPUs})
}

// enableV2Controllers makes memory and cpu available to the children of
// dir, creating dir's ancestors below the root as needed.
func enableV2Controllers(dir string) error {
	rel, err := filepath.Rel(cgroupRoot, dir)
	if err != nil {
		return err
	}
	cur := cgroupRoot
	parts := strings.Split(rel, "/")
	for i := 0; ; i++ {
		if err := os.WriteFile(cur+"/cgroup.subtree_control", []byte("+memory +cpu"), 0); err != nil {
			return fmt.Errorf("cgroup: enable memory and cpu in %s: %w", cur, err)
		}
		if i == len(parts) || rel == "." {
			return nil
		}
		cur = filepath.Join(cur, parts[i])
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", cur, err)
		}
	}
}

// cgroupStats is a snapshot of the sandbox's cgroup (gVisor's own memory
// and CPU included).
type cgroupStats struct {
	MemoryBytes int64
	MemoryPeak  int64
	CPUNanos    int64
	OOMKills    int64
}

func (c *sandboxCgroup) stats() cgroupStats {
	var s cgroupStats
	if c.v2 {
		d := c.path("")
		s.MemoryBytes = cgroupfs.ReadInt(d, "memory.current")
		s.MemoryPeak = cgroupfs.ReadInt(d, "memory.peak")
		s.CPUNanos = cgroupfs.ReadKey(d, "cpu.stat", "usage_usec") * 1000
		s.OOMKills = cgroupfs.ReadKey(d, "memory.events", "oom_kill")
		return s
	}
	s.MemoryBytes = cgroupfs.ReadInt(c.path("memory"), "memory.usage_in_bytes")
	s.MemoryPeak = cgroupfs.ReadInt(c.path("memory"), "memory.max_usage_in_bytes")
	s.CPUNanos = cgroupfs.ReadInt(c.path("cpuacct"), "cpuacct.usage")
	s.OOMKills = cgroupfs.ReadKey(c.path("memory"), "memory.oom_control", "oom_kill")
	return s
}

// remove deletes the cgroup directories (empty once runsc has exited).
// Missing directories are fine.
func (c *sandboxCgroup) remove() error {
	var errs []error
	for _, d := range c.dirs() {
		if err := cgroupfs.Remove(d, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftoverCgroups lists the cgroup directories of id that still exist.
func leftoverCgroups(parent, id string) []string {
	var out []string
	for _, d := range newSandboxCgroup(parent + "/" + id).dirs() {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}
