package gvisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupV2 reports whether the host uses the unified hierarchy only.
func cgroupV2() bool {
	_, err := os.Stat(cgroupRoot + "/cgroup.controllers")
	return err == nil
}

// sandboxCgroup is the cgroup runsc makes for one sandbox (path relative to
// each hierarchy's root). runsc creates and removes it; the backend reads
// stats from it, watches it for OOM kills and removes what runsc left.
type sandboxCgroup struct {
	rel string
	v2  bool

	mu     sync.Mutex
	oomFd  *os.File // v1 eventfd registered on memory.oom_control
	events uint64   // eventfd notifications seen (OOM, plus one at removal)
	wake   chan struct{}
}

func newSandboxCgroup(rel string) *sandboxCgroup {
	return &sandboxCgroup{rel: strings.Trim(rel, "/"), v2: cgroupV2(), wake: make(chan struct{}, 1)}
}

func (c *sandboxCgroup) path(ctrl string) string {
	if c.v2 {
		return filepath.Join(cgroupRoot, c.rel)
	}
	return filepath.Join(cgroupRoot, ctrl, c.rel)
}

// cgroupStats is a snapshot of the sandbox's cgroup (the sentry, the gofer
// and everything the sandbox runs: gVisor's own memory counts).
type cgroupStats struct {
	MemoryBytes int64
	MemoryPeak  int64
	CPUNanos    int64
}

func (c *sandboxCgroup) stats() cgroupStats {
	var s cgroupStats
	if c.v2 {
		s.MemoryBytes = readInt(c.path("") + "/memory.current")
		s.MemoryPeak = readInt(c.path("") + "/memory.peak")
		if b, err := os.ReadFile(c.path("") + "/cpu.stat"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.CPUNanos = n * 1000
				}
			}
		}
		return s
	}
	s.MemoryBytes = readInt(c.path("memory") + "/memory.usage_in_bytes")
	s.MemoryPeak = readInt(c.path("memory") + "/memory.max_usage_in_bytes")
	s.CPUNanos = readInt(c.path("cpuacct") + "/cpuacct.usage")
	return s
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// watchOOM registers for the cgroup's OOM notifications (cgroup v1). The
// eventfd also fires once when runsc removes the cgroup, so an OOM is
// "more than one notification" (see oomKilled).
func (c *sandboxCgroup) watchOOM() error {
	if c.v2 {
		return nil // memory.events disappears with the cgroup; not tracked
	}
	dir := c.path("memory")
	ctl, err := os.Open(dir + "/memory.oom_control")
	if err != nil {
		return fmt.Errorf("open memory.oom_control: %w", err)
	}
	defer ctl.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	f := os.NewFile(uintptr(efd), "oom-eventfd")
	reg := fmt.Sprintf("%d %d", efd, ctl.Fd())
	if err := os.WriteFile(dir+"/cgroup.event_control", []byte(reg), 0); err != nil {
		f.Close()
		return fmt.Errorf("register oom notification: %w", err)
	}
	c.oomFd = f
	go func() {
		buf := make([]byte, 8)
		for {
			n, err := f.Read(buf)
			if err != nil || n != 8 {
				return
			}
			c.mu.Lock()
			c.events += binary.NativeEndian.Uint64(buf)
			c.mu.Unlock()
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}()
	return nil
}

// oomKilled reports, after the sandbox died and runsc removed the cgroup,
// whether the memory limit killed it: an OOM notification came besides
// the one for the removal. It waits up to wait for late notifications.
func (c *sandboxCgroup) oomKilled(wait time.Duration) bool {
	if c.oomFd == nil {
		return false
	}
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		n := c.events
		c.mu.Unlock()
		if n >= 2 {
			return true
		}
		select {
		case <-c.wake:
		case <-deadline:
			return n == 1 && c.exists()
		}
	}
}

func (c *sandboxCgroup) exists() bool {
	_, err := os.Stat(c.path("memory"))
	return err == nil
}

// close stops the OOM watch.
func (c *sandboxCgroup) close() {
	if c.oomFd != nil {
		c.oomFd.Close()
	}
}

// remove deletes what runsc left of the cgroup (it removes it itself when
// it exits normally). Missing directories are fine.
func (c *sandboxCgroup) remove() error {
	var dirs []string
	if c.v2 {
		dirs = []string{c.path("")}
	} else {
		ents, err := os.ReadDir(cgroupRoot)
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if e.IsDir() || e.Type()&os.ModeSymlink != 0 {
				dirs = append(dirs, filepath.Join(cgroupRoot, e.Name(), c.rel))
			}
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirRetry removes an empty cgroup directory; a just-killed process may
// keep it busy for a moment.
func rmdirRetry(d string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, err)
}

// leftoverCgroups lists the cgroup directories of id that still exist.
func leftoverCgroups(parent, id string) []string {
	c := newSandboxCgroup(parent + "/" + id)
	var out []string
	if c.v2 {
		if _, err := os.Stat(c.path("")); err == nil {
			out = append(out, c.path(""))
		}
		return out
	}
	ents, _ := os.ReadDir(cgroupRoot)
	for _, e := range ents {
		d := filepath.Join(cgroupRoot, e.Name(), c.rel)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}
