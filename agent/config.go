package agent

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// EnvironPrivateFlag, after `agent serve`, tells the agent that its
// runtime keeps its /proc/1/environ from the sandbox's processes (so it
// need not start again without an environment; gVisor's runsc since 2023).
const EnvironPrivateFlag = "--environ-private"

// GuestConfig travels host -> guest in Hello; the guest never trusts
// anything else (not its own environment, not its command line).
type GuestConfig struct {
	Env     []string `json:"env,omitempty"`     // complete base environment "K=V" (already policy-filtered by host)
	Workdir string   `json:"workdir,omitempty"` // default working directory
	UID     int      `json:"uid"`               // credentials for spawned processes (-1: keep the agent's)
	GID     int      `json:"gid"`
	// EgressAddr ("127.0.0.1:3128"): the guest listens there and tunnels
	// each accepted connection to the host as an egress stream; "" = none.
	// Must be an IP literal and port.
	EgressAddr string        `json:"egress_addr,omitempty"`
	Timeout    time.Duration `json:"timeout_ns,omitempty"` // default per-exec wall timeout (0 = none)
	// NoClone3: the guest makes clone3 fail with ENOSYS for itself and
	// every process it starts (a seccomp filter of its own), where the
	// runtime enforces the host's profile but cannot return ENOSYS and
	// implements clone3 (gVisor's runsc since 2023): a filter cannot read
	// clone3's flags, so libc must fall back to clone, whose namespace
	// flags the runtime's profile refuses.
	NoClone3 bool `json:"no_clone3,omitempty"`
	// SkipPrograms: no egress rule names programs, so the guest does not
	// name the program behind each egress connection (a walk of /proc per
	// connection) until a "programs" request says so. Set by the Client
	// from its egress handler (sandbox.ProgramRules); the zero value names
	// every connection.
	SkipPrograms bool `json:"skip_programs,omitempty"`
}

// validate is run by the host before sending and by the guest on receipt.
func (c *GuestConfig) validate() error {
	if len(c.Env) > MaxEnv {
		return fmt.Errorf("guest config: %d env entries exceed %d: %w", len(c.Env), MaxEnv, sandbox.ErrInvalid)
	}
	total := 0
	for _, kv := range c.Env {
		total += len(kv) + 1
		if err := checkEnvEntry(kv); err != nil {
			return fmt.Errorf("guest config: %w", err)
		}
	}
	if total > MaxArgvEnvBytes {
		return fmt.Errorf("guest config: env of %d bytes exceeds %d: %w", total, MaxArgvEnvBytes, sandbox.ErrInvalid)
	}
	if c.Workdir != "" {
		if err := checkPath(c.Workdir); err != nil {
			return fmt.Errorf("guest config: workdir: %w", err)
		}
	}
	if c.UID < -1 || c.GID < -1 || c.UID > 1<<31-2 || c.GID > 1<<31-2 {
		return fmt.Errorf("guest config: uid/gid %d/%d out of range: %w", c.UID, c.GID, sandbox.ErrInvalid)
	}
	if c.EgressAddr != "" {
		host, port, err := net.SplitHostPort(c.EgressAddr)
		if err != nil {
			return fmt.Errorf("guest config: egress address %q: %v: %w", c.EgressAddr, err, sandbox.ErrInvalid)
		}
		if _, err := netip.ParseAddr(host); err != nil || port == "" {
			return fmt.Errorf("guest config: egress address %q: want IP:port: %w", c.EgressAddr, sandbox.ErrInvalid)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("guest config: negative timeout: %w", sandbox.ErrInvalid)
	}
	return nil
}

func checkEnvEntry(kv string) error {
	i := strings.IndexByte(kv, '=')
	if i <= 0 {
		return fmt.Errorf("env entry %q is not K=V: %w", kv, sandbox.ErrInvalid)
	}
	if strings.IndexByte(kv, 0) >= 0 {
		return fmt.Errorf("env entry %q contains NUL: %w", kv[:i], sandbox.ErrInvalid)
	}
	return nil
}

// checkExec validates an exec request on either side.
func checkExec(r *execRequest) error {
	if len(r.Args) == 0 || r.Args[0] == "" {
		return fmt.Errorf("empty command: %w", sandbox.ErrInvalid)
	}
	if len(r.Args) > MaxArgs || len(r.Env) > MaxEnv {
		return fmt.Errorf("too many arguments or env entries: %w", sandbox.ErrInvalid)
	}
	total := 0
	for _, a := range r.Args {
		total += len(a) + 1
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argument contains NUL: %w", sandbox.ErrInvalid)
		}
	}
	for _, kv := range r.Env {
		total += len(kv) + 1
		if err := checkEnvEntry(kv); err != nil {
			return err
		}
	}
	if total > MaxArgvEnvBytes {
		return fmt.Errorf("argv and env of %d bytes exceed %d: %w", total, MaxArgvEnvBytes, sandbox.ErrInvalid)
	}
	if r.Dir != "" {
		if err := checkPath(r.Dir); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	if r.Timeout < 0 {
		return fmt.Errorf("negative timeout: %w", sandbox.ErrInvalid)
	}
	return nil
}

// ClientOptions configures the host side.
type ClientOptions struct {
	SandboxID string
	Log       *slog.Logger          // nil: discard
	Audit     audit.Sink            // nil: discard
	Egress    sandbox.EgressHandler // nil: egress streams are refused
	// OutputLimit bounds stdout+stderr bytes copied per exec; 0 = unlimited.
	// Past it the host stops copying, kills the process and reports
	// ExitStatus.Truncated.
	OutputLimit int64
	// MaxEgressStreams bounds concurrently tunnelled egress connections
	// (0: 64). Further connections are refused.
	MaxEgressStreams int
}

// ServeOptions configures the guest side.
type ServeOptions struct {
	Log *slog.Logger // nil: discard
	// Root is the directory file operations resolve inside ("" = "/").
	// Processes are not confined to it; the backend's pivot_root does that.
	Root string
	// ProcessCgroup, when set, is an open cgroup v2 directory every process
	// starts in (CLONE_INTO_CGROUP), so its limits (pids.max) count the
	// sandbox's processes and not the agent's threads. The microvm guest
	// sets it; nil: processes stay in the agent's cgroup.
	ProcessCgroup *os.File
}

func discardLogger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// SessionFor is what a backend's host side hands NewClient and Hello for a
// sandbox made from spec under its resolved policy pol, env being the
// sandbox's base environment (sandbox.Environ). One place, so that every
// backend bounds output and routes egress alike: the guest listens for
// proxy clients only when the policy has a network mode and the spec an
// egress handler. The agent keeps its own uid/gid (the backend set them).
func SessionFor(spec sandbox.Spec, pol *policy.Policy, env []string, log *slog.Logger, sink audit.Sink) (ClientOptions, GuestConfig) {
	gc := GuestConfig{Env: env, Workdir: pol.Process.Workdir, UID: -1, GID: -1}
	if pol.Network.Mode != "" && pol.Network.Mode != policy.NetworkNone && spec.Egress != nil {
		gc.EgressAddr = sandbox.EgressAddr
	}
	opts := ClientOptions{
		SandboxID: spec.ID, Log: log, Audit: sink, Egress: spec.Egress,
		OutputLimit: int64(pol.Limits.OutputBytes),
	}
	return opts, gc
}
