package microvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cleanup removes what sandboxes not in keep left behind (after a crash):
// VMM processes, VM directories (sockets), cgroups, and half-made
// template files. Templates themselves are caches and stay (see
// RemoveTemplates). Idempotent.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	var errs []error
	ents, _ := os.ReadDir(b.vmsDir())
	for _, e := range ents {
		id := e.Name()
		if keep[id] || inUse(id) {
			continue
		}
		if err := b.cleanupVM(id); err != nil {
			errs = append(errs, err)
		}
	}
	{
		files, _ := filepath.Glob(filepath.Join(b.cfg.CacheDir, tmpPrefix+"*"))
		for _, f := range files {
			if strings.Contains(filepath.Base(f), "-"+strconv.Itoa(os.Getpid())+"-") {
				continue
			}
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cleanupVM kills the VMM of id (found by its QMP socket path on its
// command line, which names this backend's state dir), then removes the
// directory and cgroup.
func (b *Backend) cleanupVM(id string) error {
	for _, pid := range b.vmmPids(id) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 100 && len(b.vmmPids(id)) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	var errs []error
	if err := os.RemoveAll(filepath.Join(b.vmsDir(), id)); err != nil {
		errs = append(errs, err)
	}
	if err := newVMCgroup(b.cfg.CgroupParent + "/" + id).remove(); err != nil {
		errs = append(errs, fmt.Errorf("cgroup of %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// vmmPids lists live processes whose command line carries id's QMP socket.
func (b *Backend) vmmPids(id string) []int {
	needle := []byte(filepath.Join(b.vmsDir(), id, qmpSock))
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, needle) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}
