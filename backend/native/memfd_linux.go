package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

const memfdNoexec = "/proc/sys/vm/memfd_noexec"

// sealMemfdExec sets vm.memfd_noexec to 2 (memfds sealed non-executable,
// MFD_EXEC refused) in the pid namespace of the init pid, for a sandbox
// whose init cannot: the sysctl is per pid namespace, written as the
// writer's own, and only global root may write it, which a sandbox with a
// host id range has nowhere inside. A host-root child is started in the
// init's pid namespace for this (before the "go": nothing of the
// sandbox runs yet) and writes it. Without the sysctl (Linux < 6.3)
// there is nothing to do.
func sealMemfdExec(pid int) error {
	if _, err := os.Stat(memfdNoexec); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return fmt.Errorf("memfd_noexec: pid namespace of the init: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: this thread's children are born in the
		// sandbox's pid namespace; it exits with the goroutine.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWPID); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		cmd := exec.Command("/bin/sh", "-c", "echo 2 > "+memfdNoexec)
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("memfd_noexec in the sandbox's pid namespace: %v: %w", err, sandbox.ErrUnavailable)
	}
	return nil
}
