package microvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
)

const cgroupRoot = "/sys/fs/cgroup"

// vmCgroup is the host cgroup of one VMM process: its memory (guest RAM
// plus the VMM's own) and CPU (the vCPUs) are bounded there, so a VM
// escape cannot take the host's. The jail helper joins it before it execs
// the VMM (cgroup v1 and v2 alike).
type vmCgroup struct {
	rel string
	v2  bool
}

// vmControllers are the v1 hierarchies a VM cgroup is made in.
var vmControllers = []string{"memory", "cpu", "cpuacct"}

func newVMCgroup(rel string) *vmCgroup {
	_, err := os.Stat(cgroupRoot + "/cgroup.controllers")
	return &vmCgroup{rel: strings.Trim(rel, "/"), v2: err == nil}
}

func (c *vmCgroup) dirs() []string {
	if c.v2 {
		return []string{filepath.Join(cgroupRoot, c.rel)}
	}
	var out []string
	for _, ctrl := range vmControllers {
		out = append(out, filepath.Join(cgroupRoot, ctrl, c.rel))
	}
	return out
}

// create makes the cgroup with its limits; on error nothing is left.
func (c *vmCgroup) create(memory int64, cpus float64) (err error) {
	defer func() {
		if err != nil {
			c.remove()
		}
	}()
	if c.v2 {
		cur := cgroupRoot
		for _, part := range append([]string{""}, strings.Split(filepath.Dir(c.rel), "/")...) {
			if part != "" && part != "." {
				cur = filepath.Join(cur, part)
				if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					return fmt.Errorf("cgroup %s: %w", cur, err)
				}
			}
			if err := os.WriteFile(cur+"/cgroup.subtree_control", []byte("+memory +cpu"), 0); err != nil {
				return fmt.Errorf("cgroup: enable memory and cpu in %s: %w", cur, err)
			}
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
	d := c.dirs()
	pl := cgroupfs.Placement{V2Dir: d[0], Memory: cgroupfs.V2, CPU: cgroupfs.V2}
	if !c.v2 {
		pl = cgroupfs.Placement{V1Dirs: map[string]string{"memory": d[0], "cpu": d[1]}, Memory: cgroupfs.V1, CPU: cgroupfs.V1}
	}
	return cgroupfs.Apply(pl, cgroupfs.Limits{Memory: memory, CPUs: cpus})
}

// stats reads the VMM's memory and CPU use.
func (c *vmCgroup) stats() (mem, peak, cpu int64) {
	d := c.dirs()
	if c.v2 {
		return cgroupfs.ReadInt(d[0], "memory.current"), cgroupfs.ReadInt(d[0], "memory.peak"), cgroupfs.ReadKey(d[0], "cpu.stat", "usage_usec") * 1000
	}
	return cgroupfs.ReadInt(d[0], "memory.usage_in_bytes"), cgroupfs.ReadInt(d[0], "memory.max_usage_in_bytes"), cgroupfs.ReadInt(d[2], "cpuacct.usage")
}

// remove deletes the cgroup directories (empty once the VMM has exited).
func (c *vmCgroup) remove() error {
	var errs []error
	for _, d := range c.dirs() {
		if err := cgroupfs.Remove(d, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
