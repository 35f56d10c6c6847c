package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
)

// runc's wording, which containerd's shim matches to treat a dead or
// missing container as benign ("does not exist", "container not running").
var (
	ErrNotExist   = fmt.Errorf("container does not exist: %w", errdefs.ErrNotFound)
	ErrNotRunning = fmt.Errorf("container not running: %w", errdefs.ErrNotFound)
)

// DefaultRoot is the state directory when --root is not given.
const DefaultRoot = "/run/airlock-runc"

func checkID(id string) error {
	ok := len(id) > 0 && len(id) <= 1024 && id != "." && id != ".."
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_+.-", c) >= 0
	}
	if !ok {
		return fmt.Errorf("invalid container id %q: %w", id, errdefs.ErrInvalid)
	}
	return nil
}

// containerState is what the runtime remembers about a container, in
// ROOT/ID/state.json (root-only). The process is identified by pid and
// start time, so a recycled pid is never mistaken for the container.
type containerState struct {
	ID           string            `json:"id"`
	Bundle       string            `json:"bundle"`
	Rootfs       string            `json:"rootfs"`
	Pid          int               `json:"pid"`
	PidStart     uint64            `json:"pid_start"`
	Created      time.Time         `json:"created"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Cgroups      cgroupPaths       `json:"cgroups"`
	Monitor      int               `json:"monitor,omitempty"`
	MonitorStart uint64            `json:"monitor_start,omitempty"`
	Policy       string            `json:"policy"`
	Confine      confinement       `json:"confine"`
	PrivateNet   bool              `json:"private_net,omitempty"`
	Hooks        *specs.Hooks      `json:"hooks,omitempty"`
	Env          []string          `json:"env,omitempty"` // the container's, for exec's defaults
}

// Status values, as runc reports them.
const (
	statusCreated = "created"
	statusRunning = "running"
	statusStopped = "stopped"
)

type store struct{ root string }

func (s store) dir(id string) string       { return filepath.Join(s.root, id) }
func (s store) fifo(id string) string      { return filepath.Join(s.root, id, "exec.fifo") }
func (s store) stateFile(id string) string { return filepath.Join(s.root, id, "state.json") }

// load reads a container's state: ErrNotExist when there is none.
func (s store) load(id string) (*containerState, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.stateFile(id))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotExist
		}
		return nil, fmt.Errorf("read state of %s: %w", id, err)
	}
	var st containerState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state of %s: %v: %w", id, err, errdefs.ErrInvalid)
	}
	return &st, nil
}

// save writes the state atomically.
func (s store) save(st *containerState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := s.stateFile(st.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.stateFile(st.ID))
}

// status is created (waiting for start), running or stopped.
func (s store) status(st *containerState) string {
	if !alive(st.Pid, st.PidStart) {
		return statusStopped
	}
	if _, err := os.Lstat(s.fifo(st.ID)); err == nil {
		return statusCreated
	}
	return statusRunning
}

// procStart returns a process's start time (field 22 of /proc/PID/stat)
// and whether it is a zombie.
func procStart(pid int) (start uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("bad stat of %d", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, fmt.Errorf("bad stat of %d", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0] == "Z" || f[0] == "X", err
}

// alive reports whether pid is still the process that started at start.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	s, zombie, err := procStart(pid)
	return err == nil && !zombie && s == start
}

// ociState is the state as the OCI runtime spec (and runc) print it.
func (s store) ociState(st *containerState) specs.State {
	status := s.status(st)
	pid := st.Pid
	if status == statusStopped {
		pid = 0
	}
	return specs.State{Version: specs.Version, ID: st.ID, Status: specs.ContainerState(status), Pid: pid,
		Bundle: st.Bundle, Annotations: st.Annotations}
}

// runcState is `runc state`'s output: the OCI state plus rootfs, created
// and owner.
type runcState struct {
	OCIVersion  string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Rootfs      string            `json:"rootfs"`
	Created     time.Time         `json:"created"`
	Owner       string            `json:"owner"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// signalProc sends sig to pid if it is still the process that started at
// start (pidfd: no race with pid reuse once opened).
func signalProc(pid int, start uint64, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return ErrNotRunning
	}
	defer unix.Close(fd)
	if !alive(pid, start) {
		return ErrNotRunning
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return ErrNotRunning
		}
		return err
	}
	return nil
}

// joinsPrivateNet reports whether one of joins is the network namespace a
// live container of this root made private for its network-none policy
// (a pod's pause container): joining it keeps that policy.
func (s store) joinsPrivateNet(joins []nsJoin) bool {
	var target *unix.Stat_t
	for _, j := range joins {
		if j.flag == unix.CLONE_NEWNET {
			var st unix.Stat_t
			if unix.Fstat(int(j.f.Fd()), &st) == nil {
				target = &st
			}
		}
	}
	if target == nil {
		return false
	}
	ents, _ := os.ReadDir(s.root)
	for _, e := range ents {
		st, err := s.load(e.Name())
		if err != nil || !st.PrivateNet || !alive(st.Pid, st.PidStart) {
			continue
		}
		var ns unix.Stat_t
		if unix.Stat("/proc/"+strconv.Itoa(st.Pid)+"/ns/net", &ns) == nil && ns.Ino == target.Ino && ns.Dev == target.Dev {
			return true
		}
	}
	return false
}
