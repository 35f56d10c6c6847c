package kubecluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop stops the cluster and puts the host back as Before recorded it:
// every pod removed (containers, shims, network namespaces, veths), every
// daemon stopped, what they mounted unmounted, the bridge removed, the
// sysctls, iptables chains, host dirs and cgroups restored, the dir
// removed. It then compares the host with Before and returns an error
// naming whatever differs. Idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return c.stopErr
	}
	c.stopped = true
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	var errs []error
	if c.Dir != "" {
		errs = teardown(c.state, procs)
	}
	if c.Dir != "" {
		_ = os.Remove(c.statePath())
	}
	if c.gpipe != nil {
		// The guard sees the state file gone and exits without acting.
		c.gpipe.Close()
		_ = c.guard.Wait()
	}
	if c.Before != nil {
		after, err := Snapshot()
		if err != nil {
			errs = append(errs, err)
		} else if d := c.Before.Diff(after); len(d) > 0 {
			errs = append(errs, fmt.Errorf("host differs after the cluster stopped:\n  %s", strings.Join(d, "\n  ")))
		}
	}
	if c.lock != nil {
		c.lock.Close()
	}
	c.stopErr = errors.Join(errs...)
	return c.stopErr
}

// teardown undoes a cluster from its state (also in the guard, when the
// harness died first: then procs is nil and the pids are signalled).
func teardown(st guardState, procs []*proc) []error {
	var errs []error
	// The kubelet first (it would restart what is removed under it),
	// then every pod through CRI while containerd still runs.
	for _, p := range procs {
		if p.name == "kubelet" {
			p.stop(10 * time.Second)
		}
	}
	if procs == nil {
		killPids(st.Pids)
	}
	if crictl, err := crictlPath(); err == nil && st.Socket != "" {
		ep := "unix://" + st.Socket
		_ = exec.Command(crictl, "-r", ep, "-i", ep, "--timeout", "30s", "rmp", "-fa").Run()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(10 * time.Second)
	}
	killPids(st.Pids)
	// Shims (and what they run) outlive containerd: end what names the
	// cluster's dir on its command line.
	killUnder(st.Dir)
	for _, m := range reverse(ourMounts(st.Dir)) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	if st.Bridge {
		if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
			if err := run("ip", "link", "del", bridgeName); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, removeCgroups()...)
	if st.Before != nil {
		errs = append(errs, st.Before.restore()...)
	}
	if st.Dir != "" {
		if err := os.RemoveAll(st.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func reverse(s []string) []string {
	sort.Sort(sort.Reverse(sort.StringSlice(s)))
	return s
}

// killPids kills the process groups the harness started.
func killPids(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(-p, syscall.SIGKILL)
	}
}

// killUnder kills every process whose command line names dir (the
// containerd shims get -address DIR/c.sock), then waits for them to go.
func killUnder(dir string) {
	if dir == "" {
		return
	}
	for try := 0; try < 50; try++ {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		found := false
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), dir+"/") {
				continue
			}
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			if pid == os.Getpid() {
				continue
			}
			found = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes the kubelet's kubepods trees, deepest first.
func removeCgroups() []error {
	var errs []error
	for _, top := range ourCgroups() {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Containers whose containerd died first (the guard's case) are
		// still in them: their shims are gone, so kill them here.
		killCgroupProcs(dirs)
		for _, d := range reverse(dirs) {
			var err error
			for try := 0; try < 20; try++ {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond) // a process still leaving
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errs
}

// killCgroupProcs kills every process in the cgroup dirs, waiting up to
// two seconds for them to go.
func killCgroupProcs(dirs []string) {
	for try := 0; try < 20; try++ {
		found := false
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					found = true
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
