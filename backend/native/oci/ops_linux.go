package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
)

// Start runs the user's program of a created container: its init execs it
// in place. It returns once the program runs (the init's end of the exec
// fifo closes on exec).
func (r *Runtime) Start(ctx context.Context, id string) error {
	if err := r.init(); err != nil {
		return err
	}
	s := r.store()
	st, err := s.load(id)
	if err != nil {
		return err
	}
	switch s.status(st) {
	case statusStopped:
		return fmt.Errorf("cannot start a container that has stopped: %w", errdefs.ErrInvalid)
	case statusRunning:
		return fmt.Errorf("cannot start an already running container: %w", errdefs.ErrInvalid)
	}
	fd, err := unix.Open(s.fifo(id), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("cannot start a container that has stopped: %w", errdefs.ErrInvalid)
		}
		return fmt.Errorf("exec fifo: %w", err)
	}
	defer unix.Close(fd)
	// Only one start wins: the fifo goes before the byte does.
	if err := os.Remove(s.fifo(id)); err != nil {
		return fmt.Errorf("cannot start an already running container: %w", errdefs.ErrInvalid)
	}
	if _, err := unix.Write(fd, []byte{0}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	// The read end closes when the init execs (or dies): POLLERR.
	deadline := time.Now().Add(setupTimeout)
	for time.Now().Before(deadline) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: 0}}
		n, err := unix.Poll(pfd, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("start: %w", err)
		}
		if n > 0 && pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			break
		}
		if !alive(st.Pid, st.PidStart) {
			break
		}
	}
	if !alive(st.Pid, st.PidStart) {
		// The program ran and ended already, or the exec failed; either
		// way the shim reaps the exit status.
		r.Log.Debug("container exited right after start", "id", id)
	}
	if st.Hooks != nil && len(st.Hooks.Poststart) > 0 {
		if err := runHooks(ctx, st.Hooks.Poststart, s.ociState(st)); err != nil {
			r.Log.Warn("poststart hook failed", "id", id, "err", err)
		}
	}
	return nil
}

// State returns runc's state record of a container.
func (r *Runtime) State(id string) (any, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	s := r.store()
	st, err := s.load(id)
	if err != nil {
		return nil, err
	}
	o := s.ociState(st)
	return runcState{OCIVersion: o.Version, ID: o.ID, Pid: o.Pid, Status: string(o.Status), Bundle: o.Bundle,
		Rootfs: st.Rootfs, Created: st.Created, Owner: "", Annotations: o.Annotations}, nil
}

// List returns the state of every container under the root.
func (r *Runtime) List() ([]any, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(r.Root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	out := []any{}
	for _, e := range ents {
		if st, err := r.State(e.Name()); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// Kill sends sig to the container's process, or with all to every process
// in its cgroups (then a stopped container is no error, as with runc).
func (r *Runtime) Kill(id string, sig syscall.Signal, all bool) error {
	if err := r.init(); err != nil {
		return err
	}
	s := r.store()
	st, err := s.load(id)
	if err != nil {
		return err
	}
	if all {
		st.Cgroups.signalAll(sig)
		return nil
	}
	if s.status(st) == statusStopped {
		return ErrNotRunning
	}
	return signalProc(st.Pid, st.PidStart, sig)
}

// Delete removes a stopped (or, with force, any) container: its
// processes, monitor, cgroups and state; the poststop hooks run last.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	if err := r.init(); err != nil {
		return err
	}
	s := r.store()
	st, err := s.load(id)
	if err != nil {
		if errors.Is(err, ErrNotExist) && checkID(id) == nil {
			// A create that died before writing its state.
			_ = os.RemoveAll(s.dir(id))
			if force {
				return nil
			}
		}
		return err
	}
	status := s.status(st)
	if status == statusRunning && !force {
		return fmt.Errorf("cannot delete container %s that is not stopped: %s: %w", id, status, errdefs.ErrInvalid)
	}
	st.Cgroups.signalAll(syscall.SIGKILL)
	if alive(st.Pid, st.PidStart) {
		_ = signalProc(st.Pid, st.PidStart, syscall.SIGKILL)
	}
	if st.Monitor > 0 && alive(st.Monitor, st.MonitorStart) {
		_ = signalProc(st.Monitor, st.MonitorStart, syscall.SIGKILL)
	}
	// The shim reaps the init; wait until it is gone before the cgroups go.
	for i := 0; i < 200 && alive(st.Pid, st.PidStart); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	var errs []error
	if err := st.Cgroups.remove(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.dir(id)); err != nil {
		errs = append(errs, err)
	}
	if st.Hooks != nil && len(st.Hooks.Poststop) > 0 {
		o := s.ociState(st)
		o.Status = specs.StateStopped
		if err := runHooks(ctx, st.Hooks.Poststop, o); err != nil {
			r.Log.Warn("poststop hook failed", "id", id, "err", err)
		}
	}
	return errors.Join(errs...)
}

// Ps lists the host pids of the container's processes.
func (r *Runtime) Ps(id string) ([]int, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	st, err := r.store().load(id)
	if err != nil {
		return nil, err
	}
	pids := st.Cgroups.pids()
	sort.Ints(pids)
	if pids == nil {
		pids = []int{}
	}
	return pids, nil
}

// runHooks runs OCI hooks in order with the state on stdin; the first
// failure (or timeout) is the error.
func runHooks(ctx context.Context, hooks []specs.Hook, state specs.State) error {
	in, err := json.Marshal(state)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		timeout := setupTimeout
		if h.Timeout != nil && *h.Timeout > 0 {
			timeout = time.Duration(*h.Timeout) * time.Second
		}
		hctx, cancel := context.WithTimeout(ctx, timeout)
		cmd := exec.CommandContext(hctx, h.Path)
		if len(h.Args) > 0 {
			cmd.Args = h.Args
		}
		cmd.Env = h.Env
		cmd.Stdin = bytes.NewReader(in)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			msg := out.String()
			if len(msg) > 2048 {
				msg = msg[:2048]
			}
			return fmt.Errorf("hook %s: %v: %s: %w", h.Path, err, msg, errdefs.ErrUnavailable)
		}
	}
	return nil
}
