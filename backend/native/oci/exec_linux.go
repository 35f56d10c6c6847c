package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/undo"
	"github.com/airlock-dev/airlock/errdefs"
)

// ExecOpts are `exec`'s flags.
type ExecOpts struct {
	// Process is a file holding an OCI process (what containerd passes);
	// without it Args (and Cwd, Env, TTY) describe the process.
	Process       string
	Args          []string
	Cwd           string
	Env           []string
	TTY           bool
	PidFile       string
	ConsoleSocket string
	Detach        bool
}

// Exec starts another process in a running container: in all its
// namespaces and cgroups, confined exactly as the container's own process
// (the same Landlock domain, seccomp floor and filter, capability ceiling
// and policy). With Detach it returns once the process runs (its pid in
// PidFile, a child of the caller's subreaper); otherwise it waits and
// returns its exit code.
func (r *Runtime) Exec(ctx context.Context, id string, o ExecOpts) (code int, err error) {
	if err := r.init(); err != nil {
		return -1, err
	}
	s := r.store()
	st, err := s.load(id)
	if err != nil {
		return -1, err
	}
	if s.status(st) != statusRunning {
		return -1, fmt.Errorf("cannot exec in a container that is not running (%s): %w", s.status(st), errdefs.ErrInvalid)
	}
	proc, err := execProcess(o, st)
	if err != nil {
		return -1, err
	}
	d, err := decide(r.Operator, st.Annotations)
	if err != nil {
		return -1, err
	}
	pp, err := processPlan(proc, r.Operator, d, true)
	if err != nil {
		return -1, err
	}
	if pp.Terminal && o.ConsoleSocket == "" {
		return -1, fmt.Errorf("process.terminal is set but no --console-socket was given: %w", errdefs.ErrInvalid)
	}
	joins, err := containerNamespaces(st.Pid)
	if err != nil {
		return -1, err
	}
	var u undo.Stack
	defer func() {
		if err != nil {
			u.Run()
		}
	}()
	var console *os.File
	if pp.Terminal {
		if console, err = dialConsole(o.ConsoleSocket); err != nil {
			return -1, err
		}
		defer console.Close()
	}
	plan := &initPlan{ID: id, Proc: *pp, Confine: st.Confine}
	ch, err := r.spawn(ExecInitCommand, plan, 0, joins, &st.Cgroups, []*os.File{nil, console}, &u)
	if err != nil {
		return -1, err
	}
	// Recheck: the container may have stopped while we entered it.
	if !alive(st.Pid, st.PidStart) {
		return -1, ErrNotRunning
	}
	listener, err := ch.proceed(ctx)
	if err != nil {
		return -1, err
	}
	if listener >= 0 {
		if err := sendToMonitor(s.dir(id), listener, pp); err != nil {
			return -1, err
		}
	}
	if o.PidFile != "" {
		if err := writePidFile(o.PidFile, ch.pid); err != nil {
			return -1, err
		}
	}
	if o.Detach {
		return 0, nil
	}
	return waitExit(ch.cmd.Process)
}

// execProcess is the process to exec: --process's process.json, else the
// command line's arguments, working directory and env (after the
// container's).
func execProcess(o ExecOpts, st *containerState) (*specs.Process, error) {
	var proc specs.Process
	if o.Process != "" {
		if err := readJSON(o.Process, &proc); err != nil {
			return nil, fmt.Errorf("process: %v: %w", err, errdefs.ErrInvalid)
		}
		return &proc, nil
	}
	if len(o.Args) == 0 {
		return nil, fmt.Errorf("exec: no command and no --process: %w", errdefs.ErrInvalid)
	}
	proc = specs.Process{Args: o.Args, Cwd: o.Cwd, Env: append(st.Env, o.Env...), Terminal: o.TTY}
	if proc.Cwd == "" {
		proc.Cwd = "/"
	}
	return &proc, nil
}

// waitExit waits for p and returns its exit code, 128+N for signal N, or
// 0 when it was reaped elsewhere (by the subreaper).
func waitExit(p *os.Process) (int, error) {
	state, err := p.Wait()
	if err != nil {
		var ee *os.SyscallError
		if errors.As(err, &ee) && errors.Is(ee.Err, syscall.ECHILD) {
			return 0, nil
		}
		return -1, err
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return state.ExitCode(), nil
}

// containerNamespaces opens the namespaces of the container's process that
// differ from ours, mount namespace last (entering it changes what paths
// mean).
func containerNamespaces(pid int) ([]nsJoin, error) {
	var joins []nsJoin
	for _, n := range []struct {
		name string
		flag uintptr
	}{{"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS}, {"net", unix.CLONE_NEWNET},
		{"pid", unix.CLONE_NEWPID}, {"cgroup", unix.CLONE_NEWCGROUP}, {"mnt", unix.CLONE_NEWNS}} {
		theirs := "/proc/" + strconv.Itoa(pid) + "/ns/" + n.name
		var a, b unix.Stat_t
		if unix.Stat(theirs, &a) != nil {
			for _, j := range joins {
				j.f.Close()
			}
			return nil, ErrNotRunning
		}
		if unix.Stat("/proc/self/ns/"+n.name, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			continue
		}
		j, err := openNamespace(theirs, n.flag)
		if err != nil {
			for _, j := range joins {
				j.f.Close()
			}
			return nil, err
		}
		joins = append(joins, j)
	}
	return joins, nil
}
