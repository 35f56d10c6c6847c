package cgroupfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Limits are what a sandbox's cgroup enforces; zero means none.
type Limits struct {
	Memory int64   // bytes (swap included: no swap beyond it)
	Pids   int     // processes
	CPUs   float64 // cores (quota per 100 ms period, at least 1 ms)
}

// Hierarchy names which cgroup hierarchy provides a controller.
type Hierarchy string

// Where a limit lives.
const (
	None Hierarchy = ""
	V1   Hierarchy = "v1"
	V2   Hierarchy = "v2"
)

// Placement is where a sandbox's cgroup directories are and which
// hierarchy provides each limited controller (hybrid hosts mix them).
type Placement struct {
	V2Dir             string            // the cgroup2 directory ("" none)
	V1Dirs            map[string]string // controller -> v1 directory
	Memory, Pids, CPU Hierarchy
}

// cpuPeriod is the CFS period the CPU quota is expressed in.
const cpuPeriod = 100000

// Apply writes lim to the hierarchy that provides each controller: the
// one writer of cgroup limits for every backend (they must not differ in
// how a limit is enforced). A limit whose controller has no provider is
// the caller's to refuse (fail closed) before calling.
func Apply(p Placement, lim Limits) error {
	if lim.Memory > 0 {
		m := strconv.FormatInt(lim.Memory, 10)
		switch p.Memory {
		case V2:
			if err := write(p.V2Dir, "memory.max", m); err != nil {
				return err
			}
			// No swap: the limit is the limit (absent without swap accounting).
			_ = write(p.V2Dir, "memory.swap.max", "0")
		case V1:
			d := p.V1Dirs["memory"]
			if err := write(d, "memory.limit_in_bytes", m); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
				if err := write(d, "memory.memsw.limit_in_bytes", m); err != nil {
					return err
				}
			}
			_ = write(d, "memory.swappiness", "0")
		}
	}
	if lim.Pids > 0 {
		n := strconv.Itoa(lim.Pids)
		switch p.Pids {
		case V2:
			if err := write(p.V2Dir, "pids.max", n); err != nil {
				return err
			}
		case V1:
			if err := write(p.V1Dirs["pids"], "pids.max", n); err != nil {
				return err
			}
		}
	}
	if lim.CPUs > 0 {
		quota := int64(lim.CPUs * cpuPeriod)
		if quota < 1000 {
			quota = 1000 // the kernel's minimum
		}
		switch p.CPU {
		case V2:
			if err := write(p.V2Dir, "cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod)); err != nil {
				return err
			}
		case V1:
			d := p.V1Dirs["cpu"]
			if err := write(d, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
				return err
			}
			if err := write(d, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
				return err
			}
		}
	}
	return nil
}

func write(dir, file, val string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
		return fmt.Errorf("cgroup: set %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}
