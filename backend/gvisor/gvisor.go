package gvisor

import (
	"log/slog"
	"os"
	"sync"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
)

// Name is the policy name of this backend.
const Name = "gvisor"

// Platforms runsc may run on. PlatformAuto picks the best one this runsc and
// host support (see choosePlatform).
const (
	PlatformAuto    = ""
	PlatformSystrap = "systrap"
	PlatformPtrace  = "ptrace"
	PlatformKVM     = "kvm"
)

// Config configures the gVisor backend.
type Config struct {
	// Runsc is the runsc binary. Empty: "runsc" looked up in PATH.
	Runsc string
	// AgentBinary is the airlock binary mounted read-only into each
	// sandbox and started there as `airlock agent serve`. Empty:
	// /proc/self/exe resolved to its path (this binary).
	AgentBinary string
	// StateDir holds runsc's state (its --root) and one bundle directory
	// per sandbox. Empty: /run/airlock/gvisor as root, else under
	// $XDG_RUNTIME_DIR or the temp dir. Cleanup treats every container
	// and bundle in it as ours: give each independent user its own.
	StateDir string
	// Platform is runsc's --platform: "" picks the best this runsc and host
	// have: kvm where it works (see kvmCheck), else systrap, else ptrace.
	// "kvm" asked for needs /dev/kvm.
	Platform string
	// CgroupParent is the cgroup path (relative to each hierarchy's root)
	// under which runsc makes one cgroup per sandbox. Empty: "airlock-gvisor".
	CgroupParent string
	// WritableDir holds image sandboxes' writable layers (see
	// internal/imageroot); one WritableDir belongs to one StateDir (Cleanup
	// sweeps it). Empty: StateDir/rw, or DataDir/gvisor/rw with the
	// default state dir.
	WritableDir string
	// Log is the backend's logger; nil discards.
	Log *slog.Logger
	// HostIDs, when set, runs every sandbox in a user namespace whose ids
	// 0..65535 map onto a leased host range (see native.Config.HostIDs).
	HostIDs *idmap.Source
}

// Backend is the gVisor sandbox backend. Create it with New. It is safe for
// concurrent use.
type Backend struct {
	cfg Config
	log *slog.Logger

	infoOnce sync.Once
	info     Info
}

// New returns the gVisor backend. It does not run runsc yet: Probe and
// Create find out what it supports (once per Backend).
func New(cfg Config) *Backend {
	if cfg.Runsc == "" {
		cfg.Runsc = "runsc"
	}
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = "/proc/self/exe"
		if p, err := os.Executable(); err == nil {
			cfg.AgentBinary = p
		}
	}
	if cfg.WritableDir == "" {
		cfg.WritableDir = hostfs.WritableDir(Name, cfg.StateDir) // before StateDir's default: not under /run
	}
	if cfg.StateDir == "" {
		cfg.StateDir = hostfs.StateDir(Name)
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "airlock-gvisor"
	}

	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: cfg.Log.With("backend", Name)}
}

// Name returns "gvisor".
func (b *Backend) Name() string { return Name }

// Info is what this host's runsc offers, for Probe and `airlock doctor`.
type Info struct {
	Path      string   `json:"path,omitempty"`      // resolved runsc binary
	Version   string   `json:"version,omitempty"`   // first line of `runsc --version`
	Platforms []string `json:"platforms,omitempty"` // platforms this runsc knows
	Platform  string   `json:"platform,omitempty"`  // the one sandboxes will use
	KVMDevice bool     `json:"kvm_device"`          // /dev/kvm exists
	KVM       string   `json:"kvm,omitempty"`       // whether the kvm platform is chosen automatically, and why
	Err       error    `json:"-"`                   // why the backend cannot run (wraps a sandbox error kind)

	kvmWorks   bool   // a trial sandbox ran on the kvm platform here
	overlayDir string // what --overlay2 wants before a directory (overlayDirPrefix)
}
