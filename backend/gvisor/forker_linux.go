package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Every `runsc run` is forked from one OS thread that is locked for the
// life of the process and never exits, for two reasons:
//   - Pdeathsig is tied to the thread that forked, not to the process: if
//     that thread ever exited (a goroutine elsewhere locks it and returns
//     without unlocking, as namespace code does), runsc would be killed
//     with its sandbox;
//   - on cgroup v1 a child starts in its forking thread's cgroups, so the
//     thread steps into the sandbox's cgroup for the fork and back out
//     (cgroup v2 uses CLONE_INTO_CGROUP instead).
var (
	forkOnce sync.Once
	forkReq  chan forkCall
)

type forkCall struct {
	fn   func() error
	done chan error
}

func onForkThread(fn func() error) error {
	forkOnce.Do(func() {
		forkReq = make(chan forkCall)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for c := range forkReq {
				c.done <- c.fn()
			}
		}()
	})
	c := forkCall{fn: fn, done: make(chan error, 1)}
	forkReq <- c
	return <-c.done
}

// startInCgroup starts cmd inside cg.
func startInCgroup(cmd *exec.Cmd, cg *sandboxCgroup) error {
	if cg.v2 {
		dir, err := os.Open(cg.path(""))
		if err != nil {
			return fmt.Errorf("open cgroup: %w", err)
		}
		defer dir.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(dir.Fd())
		return onForkThread(cmd.Start)
	}
	return onForkThread(func() error {
		tid := strconv.Itoa(unix.Gettid())
		orig, err := threadCgroups()
		if err != nil {
			return err
		}
		var moved []string
		back := func() error {
			var errs []error
			for _, ctrl := range moved {
				if err := os.WriteFile(filepath.Join(cgroupRoot, ctrl, orig[ctrl], "tasks"), []byte(tid), 0); err != nil {
					errs = append(errs, fmt.Errorf("return fork thread to its %s cgroup: %w", ctrl, err))
				}
			}
			return errors.Join(errs...)
		}
		for _, ctrl := range v1Controllers {
			if _, ok := orig[ctrl]; !ok {
				back()
				return fmt.Errorf("cgroup v1 %s controller not mounted", ctrl)
			}
			if err := os.WriteFile(cg.path(ctrl)+"/tasks", []byte(tid), 0); err != nil {
				back()
				return fmt.Errorf("enter %s cgroup: %w", ctrl, err)
			}
			moved = append(moved, ctrl)
		}
		startErr := cmd.Start()
		if err := back(); err != nil {
			// The thread is stuck in the sandbox's cgroup: every later
			// fork would land there too. Never fork from it again.
			panic("gvisor backend: " + err.Error())
		}
		return startErr
	})
}

// threadCgroups maps each v1 controller to the calling thread's cgroup path.
func threadCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			m[ctrl] = parts[2]
		}
	}
	return m, nil
}
