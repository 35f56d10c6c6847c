package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/mountinfo"
)

// cgroupPaths are a container's cgroup directories: the cgroup2 one
// (process tracking, cgroup.kill, and its controllers on a v2 host) and
// one per v1 controller on a v1 or hybrid host.
type cgroupPaths struct {
	V2 string            `json:"v2,omitempty"`
	V1 map[string]string `json:"v1,omitempty"`
	// rel is cgroupsPath as each hierarchy sees it (for the cgroup mount).
	Rel string `json:"rel"`
}

// v1Wanted are the v1 controllers a container gets a directory in.
var v1Wanted = []string{"memory", "pids", "cpu", "cpuacct", "devices", "freezer", "blkio"}

// cgroupMounts finds the cgroup2 mount and each v1 controller's mount.
func cgroupMounts() (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	mounts, _ := mountinfo.Self() // none readable: no cgroups
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			if v2 == "" {
				v2 = m.Point
			}
		case "cgroup":
			for _, c := range v1Wanted {
				if v1[c] == "" && m.HasSuperOption(c) {
					v1[c] = m.Point
				}
			}
		}
	}
	return v2, v1
}

// resolveCgroups says where a container's cgroups go. cgroupsPath is
// absolute (from each hierarchy's root), relative (below the runtime's
// own cgroup) or empty (/airlock-oci/ID); systemd's slice:prefix:name form
// needs systemd and is refused.
func resolveCgroups(cgroupsPath, id string) (*cgroupPaths, error) {
	if strings.Count(cgroupsPath, ":") == 2 {
		return nil, fmt.Errorf("cgroupsPath %q is systemd's slice:prefix:name form: the airlock runtime manages cgroups itself (set SystemdCgroup = false): %w", cgroupsPath, errdefs.ErrNotSupported)
	}
	rel := cgroupsPath
	if rel == "" {
		rel = "/airlock-oci/" + id
	}
	if !filepath.IsAbs(rel) {
		own := "/"
		if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "0::"); ok {
					own = v
				}
			}
		}
		rel = filepath.Join(own, rel)
	}
	rel = filepath.Clean(rel)
	if rel == "/" || strings.Contains(rel, "/../") {
		return nil, fmt.Errorf("cgroupsPath %q: %w", cgroupsPath, errdefs.ErrInvalid)
	}
	v2, v1 := cgroupMounts()
	c := &cgroupPaths{V1: map[string]string{}, Rel: rel}
	if v2 != "" {
		c.V2 = filepath.Join(v2, rel)
	}
	for ctl, mp := range v1 {
		c.V1[ctl] = filepath.Join(mp, rel)
	}
	return c, nil
}

// forMount lists the directories the container's cgroup mount shows, by
// the name they get below it: on a v2-only host the cgroup2 directory
// itself (""), on a hybrid host each v1 controller and "unified".
func (c *cgroupPaths) forMount() [][2]string {
	if len(c.V1) == 0 {
		if c.V2 == "" {
			return nil
		}
		return [][2]string{{"", c.V2}}
	}
	var out [][2]string
	for _, ctl := range v1Wanted {
		if d, ok := c.V1[ctl]; ok {
			out = append(out, [2]string{ctl, d})
		}
	}
	if c.V2 != "" {
		out = append(out, [2]string{"unified", c.V2})
	}
	return out
}

// create makes the directories (an existing non-empty one is an error:
// two containers must not share a cgroup) and writes the limits: the
// lower of config.json's and the policy's for memory, pids and CPUs, and
// on v1 a device allow-list of the default devices only. On error nothing
// it made is left.
func (c *cgroupPaths) create(res *specs.LinuxResources, lim cgroupfs.Limits) (err error) {
	remove, err := c.mkdirs(res, lim)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	lim = lowerLimits(res, lim)
	pl := c.placement()
	lim.CPUs = underParentQuota(pl, lim.CPUs)
	for _, need := range []struct {
		set bool
		h   cgroupfs.Hierarchy
		ctl string
	}{{lim.Memory > 0, pl.Memory, "memory"}, {lim.Pids > 0, pl.Pids, "pids"}, {lim.CPUs > 0, pl.CPU, "cpu"}} {
		if need.set && need.h == cgroupfs.None {
			return fmt.Errorf("cgroup %s controller not available for the container's limit: %w", need.ctl, errdefs.ErrUnavailable)
		}
	}
	if err := cgroupfs.Apply(pl, lim); err != nil {
		return err
	}
	if d, ok := c.V1["devices"]; ok {
		if err := writeDeviceRules(d); err != nil {
			return err
		}
	}
	if res != nil && res.CPU != nil && res.CPU.Shares != nil && *res.CPU.Shares > 0 {
		if d, ok := c.V1["cpu"]; ok && pl.CPU == cgroupfs.V1 {
			_ = os.WriteFile(filepath.Join(d, "cpu.shares"), []byte(strconv.FormatUint(*res.CPU.Shares, 10)), 0)
		}
	}
	return nil
}

// mkdirs makes the cgroup directories (an existing one must be empty) and
// on v2 alone offers the controllers the limits need. It returns what
// removes the directories it made; on error it has removed them.
func (c *cgroupPaths) mkdirs(res *specs.LinuxResources, lim cgroupfs.Limits) (remove func(), err error) {
	var made []string
	remove = func() {
		for i := len(made) - 1; i >= 0; i-- {
			_ = cgroupfs.Remove(made[i], nil)
		}
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	mk := func(d string) error {
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			if !errors.Is(err, os.ErrExist) {
				return err
			}
			if len(procsIn(d)) > 0 {
				return fmt.Errorf("cgroup %s is in use: %w", d, errdefs.ErrExists)
			}
			return nil
		}
		made = append(made, d)
		return nil
	}
	if c.V2 != "" {
		if err := mk(c.V2); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		if len(c.V1) == 0 {
			enableV2(c.V2, c.Rel, lim, res)
		}
	}
	for _, ctl := range v1Wanted {
		if d, ok := c.V1[ctl]; ok {
			if err := mk(d); err != nil {
				return nil, fmt.Errorf("cgroup %s: %w", ctl, err)
			}
		}
	}
	return remove, nil
}

// underParentQuota lowers a v1 CPU limit to the parent cgroup's quota:
// cgroup v1 refuses (EINVAL) a child quota above its parent's, which is
// what a kubelet's pod cgroup holds (the sum of its containers' limits)
// when the policy's limit is the larger. The parent's quota bounds the
// container anyway, so the lower value is the one in force.
func underParentQuota(pl cgroupfs.Placement, cpus float64) float64 {
	d, ok := pl.V1Dirs["cpu"]
	if pl.CPU != cgroupfs.V1 || !ok || cpus <= 0 {
		return cpus
	}
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(d), name))
		if err != nil {
			return -1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	quota, period := read("cpu.cfs_quota_us"), read("cpu.cfs_period_us")
	if quota <= 0 || period <= 0 {
		return cpus
	}
	if parent := float64(quota) / float64(period); parent < cpus {
		return parent
	}
	return cpus
}

// lowerLimits is lim lowered to config.json's memory, pids and CPU limits
// where those are lower.
func lowerLimits(res *specs.LinuxResources, lim cgroupfs.Limits) cgroupfs.Limits {
	if res == nil {
		return lim
	}
	if m := res.Memory; m != nil && m.Limit != nil && *m.Limit > 0 && (lim.Memory == 0 || *m.Limit < lim.Memory) {
		lim.Memory = *m.Limit
	}
	if p := res.Pids; p != nil && p.Limit != nil && *p.Limit > 0 && (lim.Pids == 0 || int(*p.Limit) < lim.Pids) {
		lim.Pids = int(*p.Limit)
	}
	if cpu := res.CPU; cpu != nil && cpu.Quota != nil && *cpu.Quota > 0 && cpu.Period != nil && *cpu.Period > 0 {
		if n := float64(*cpu.Quota) / float64(*cpu.Period); lim.CPUs == 0 || n < lim.CPUs {
			lim.CPUs = n
		}
	}
	return lim
}

// placement says which hierarchy provides each controller: cgroup2 where
// the parent offers it, else v1 where the container has a directory.
func (c *cgroupPaths) placement() cgroupfs.Placement {
	pl := cgroupfs.Placement{V2Dir: c.V2, V1Dirs: c.V1}
	offered := map[string]bool{}
	if c.V2 != "" {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(c.V2), "cgroup.subtree_control")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				offered[f] = true
			}
		}
	}
	provider := func(ctl string) cgroupfs.Hierarchy {
		if offered[ctl] {
			return cgroupfs.V2
		}
		if _, ok := c.V1[ctl]; ok {
			return cgroupfs.V1
		}
		return cgroupfs.None
	}
	pl.Memory, pl.Pids, pl.CPU = provider("memory"), provider("pids"), provider("cpu")
	return pl
}

// enableV2 offers the controllers the limits need down to the
// container's cgroup2 directory (each ancestor's subtree_control, from the
// hierarchy's root), best effort: what stays unavailable fails create below.
func enableV2(dir, rel string, lim cgroupfs.Limits, res *specs.LinuxResources) {
	var want []string
	if lim.Memory > 0 || res != nil && res.Memory != nil && res.Memory.Limit != nil {
		want = append(want, "+memory")
	}
	if lim.Pids > 0 || res != nil && res.Pids != nil {
		want = append(want, "+pids")
	}
	if lim.CPUs > 0 || res != nil && res.CPU != nil {
		want = append(want, "+cpu")
	}
	mount := strings.TrimSuffix(dir, rel)
	cur := mount
	for _, part := range strings.Split(strings.Trim(filepath.Dir(rel), "/"), "/") {
		for _, w := range want {
			_ = os.WriteFile(filepath.Join(cur, "cgroup.subtree_control"), []byte(w), 0)
		}
		if part == "" {
			break
		}
		cur = filepath.Join(cur, part)
	}
	if cur != mount {
		for _, w := range want {
			_ = os.WriteFile(filepath.Join(cur, "cgroup.subtree_control"), []byte(w), 0)
		}
	}
}

// deviceAllow are the v1 device cgroup rules: the default devices and
// the container's own ptys, nothing else (no mknod of anything else).
var deviceAllow = []string{"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
	"c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm"}

func writeDeviceRules(d string) error {
	if err := os.WriteFile(filepath.Join(d, "devices.deny"), []byte("a"), 0); err != nil {
		return fmt.Errorf("cgroup devices: %w", err)
	}
	for _, r := range deviceAllow {
		if err := os.WriteFile(filepath.Join(d, "devices.allow"), []byte(r), 0); err != nil {
			return fmt.Errorf("cgroup devices %q: %w", r, err)
		}
	}
	return nil
}

// v2FD opens the cgroup2 directory for CLONE_INTO_CGROUP (-1 if none).
func (c *cgroupPaths) v2FD() int {
	if c.V2 == "" {
		return -1
	}
	fd, err := unix.Open(c.V2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// join moves pid into every v1 directory (v2 is joined at clone time).
func (c *cgroupPaths) join(pid int) error {
	for ctl, d := range c.V1 {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join %s cgroup: %w", ctl, err)
		}
	}
	return nil
}

// pids lists every process in the container's cgroups.
func (c *cgroupPaths) pids() []int {
	seen := map[int]bool{}
	var out []int
	dirs := []string{c.V2}
	for _, d := range c.V1 {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for _, p := range procsIn(d) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

func procsIn(d string) []int {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// signalAll sends sig to every process in the cgroups. With SIGKILL on a
// cgroup2 directory, cgroup.kill does it atomically (no fork escapes).
func (c *cgroupPaths) signalAll(sig syscall.Signal) {
	if sig == syscall.SIGKILL && c.V2 != "" {
		if os.WriteFile(filepath.Join(c.V2, "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	for round := 0; round < 5; round++ {
		pids := c.pids()
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, sig)
		}
		if sig != syscall.SIGKILL {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// remove kills what is left and removes the directories.
func (c *cgroupPaths) remove() error {
	var errs []error
	busy := func(string) { c.signalAll(syscall.SIGKILL) }
	for _, d := range c.V1 {
		if err := cgroupfs.Remove(d, busy); err != nil {
			errs = append(errs, err)
		}
	}
	if c.V2 != "" {
		if err := cgroupfs.Remove(c.V2, busy); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
