package kubecluster

import (
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// guardEnv names the state file when this binary runs as a cluster's
// guard.
const guardEnv = "AIRLOCK_KUBECLUSTER_GUARD"

// guardState is what the guard needs to undo a cluster whose harness died
// (a test timeout's panic, a SIGKILL): kept in DIR.state as it grows.
type guardState struct {
	Dir    string
	Socket string
	Pids   []int
	Bridge bool
	Before *HostState
}

// The guard: any binary that links this package (a test binary, the
// cluster command) runs as one when started with guardEnv set. It waits
// for its stdin (a pipe from the harness) to close; then, if the state
// file is still there (Stop removes it with the dir), the harness died
// without stopping the cluster, and the guard tears it down. It holds the
// machine's cluster lock (inherited) until it is done.
func init() {
	state := os.Getenv(guardEnv)
	if state == "" {
		return
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	_, _ = io.Copy(io.Discard, os.Stdin)
	b, err := os.ReadFile(state)
	if err != nil {
		os.Exit(0)
	}
	var st guardState
	if err := json.Unmarshal(b, &st); err != nil {
		fmt.Fprintf(os.Stderr, "kubecluster guard: %s: %v\n", state, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kubecluster guard: the harness died; tearing down the cluster in %s\n", st.Dir)
	for _, err := range teardown(st, nil) {
		fmt.Fprintf(os.Stderr, "kubecluster guard: %v\n", err)
	}
	_ = os.Remove(state)
	os.Exit(0)
}

func (c *Cluster) statePath() string { return c.Dir + ".state" }

func (c *Cluster) saveState() error {
	b, err := json.Marshal(c.state)
	if err != nil {
		return err
	}
	tmp := c.statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.statePath())
}

// startGuard starts this binary again as the cluster's guard, its stdin a
// pipe whose write end only this process holds, and the lock file passed
// on (so the next cluster waits for the guard's teardown too).
func (c *Cluster) startGuard() error {
	if err := c.saveState(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	c.guard = exec.Command(exe)
	c.guard.Env = append(os.Environ(), guardEnv+"="+c.statePath())
	// What it could not undo goes where the harness's own errors go (the
	// cluster's dir, and a log in it, are gone by then).
	c.guard.Stdin, c.guard.Stdout, c.guard.Stderr = r, os.Stderr, os.Stderr
	c.guard.ExtraFiles = []*os.File{c.lock}
	c.guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.guard.Start(); err != nil {
		w.Close()
		return fmt.Errorf("kubecluster: start the guard: %w", err)
	}
	c.gpipe = w
	return nil
}

// crictlPath is crictl where scripts/deps.sh installs it, or on PATH.
func crictlPath() (string, error) {
	p := filepath.Join(build.Default.GOPATH, "bin", "crictl")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return exec.LookPath("crictl")
}
