package microvm

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
)

// Name is the policy name of this backend.
const Name = "microvm"

// VMM driver names (Config.VMM).
const (
	VMMAuto        = ""
	VMMQEMU        = "qemu"
	VMMFirecracker = "firecracker"
)

// Accelerators (Config.Accel).
const (
	AccelAuto = ""    // KVM when the probe guest boots under it, else TCG
	AccelKVM  = "kvm" // KVM or fail
	AccelTCG  = "tcg" // QEMU's emulator (slow, works everywhere)
)

// Config configures the microvm backend.
type Config struct {
	// VMM picks the driver: "" chooses Firecracker when a firecracker
	// binary and a working KVM exist, else QEMU.
	VMM string
	// QEMU is the qemu-system-x86_64 binary ("" : looked up in PATH).
	QEMU string
	// Firecracker is the firecracker binary ("" : looked up in PATH).
	Firecracker string
	// Accel is QEMU's accelerator: "" decides by booting a probe guest
	// under KVM once per host (cached in StateDir), never by /dev/kvm's
	// presence alone.
	Accel string
	// KernelDir is the prepared guest kernel (vmlinux, modules,
	// kernel.json). Empty: $AIRLOCK_MICROVM_DIR/kernel, else var/microvm/
	// kernel beside the binary's directory, else the data home.
	KernelDir string
	// AgentBinary is the airlock binary put into the initramfs as the
	// guest's init. Empty: this executable.
	AgentBinary string
	// StateDir holds per-VM directories (sockets). Empty:
	// /run/airlock/microvm as root. Cleanup treats every VM in it as ours.
	StateDir string
	// CacheDir holds what can be made again: the initramfs, templates
	// (RAM and device-state files) and the KVM probe's verdict, shared by
	// every Backend and process pointed at it. It must be on a disk-backed
	// filesystem, not tmpfs: VMs map a template's RAM copy-on-write, and a
	// tmpfs file's holes would be filled (and charged to each VM) on first
	// touch, doubling every VM's memory. Empty: /var/lib/airlock/microvm
	// as root, else the user's cache directory.
	CacheDir string
	// CgroupParent is the cgroup (relative to the hierarchy's root) under
	// which each VMM process gets its own. Empty: "airlock-microvm".
	CgroupParent string
	// NoTemplates boots every VM instead of restoring it from a template
	// (benchmarks of the cold path; hosts without shared memory).
	NoTemplates bool
	// HostIDs is where each VMM process's host uid and gid come from
	// (one leased range per VM: the VMM is uid 0 of a user namespace
	// mapped onto it, never host root). Nil: airlock's reserved range
	// (idmap.Default), shared with every airlock process on the host.
	HostIDs *idmap.Source
	// Log is the backend's logger; nil discards.
	Log *slog.Logger
}

// Backend is the microvm sandbox backend. Create it with New; it is safe
// for concurrent use.
type Backend struct {
	cfg Config
	log *slog.Logger

	infoOnce sync.Once
	info     Info

	initrdMu sync.Mutex
	initrd   string // built initramfs path (cached)

	tmplMu    sync.Mutex
	templates map[string]*Template // by layout key

	idsOnce sync.Once
	ids     *idmap.Source
	idsErr  error
}

// New returns the backend. It runs nothing yet: Probe and Create find out
// what the host offers (once per Backend).
func New(cfg Config) *Backend {
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = "/proc/self/exe"
		if p, err := os.Executable(); err == nil {
			cfg.AgentBinary = p
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = hostfs.StateDir(Name)
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = "/var/lib/airlock/microvm"
		if os.Geteuid() != 0 {
			if d, err := os.UserCacheDir(); err == nil {
				cfg.CacheDir = filepath.Join(d, "airlock", "microvm")
			}
		}
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "airlock-microvm"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: cfg.Log.With("backend", Name), templates: map[string]*Template{}}
}

// Name returns "microvm".
func (b *Backend) Name() string { return Name }

// Info is what this host offers the backend, for Probe and `airlock doctor`.
type Info struct {
	VMM         string `json:"vmm"`            // driver sandboxes use
	QEMU        string `json:"qemu,omitempty"` // resolved binary
	QEMUVersion string `json:"qemu_version,omitempty"`
	Firecracker string `json:"firecracker,omitempty"` // resolved binary, when present
	FCVersion   string `json:"firecracker_version,omitempty"`
	Accel       string `json:"accel"`      // kvm or tcg
	KVM         string `json:"kvm"`        // what the KVM probe found
	Kernel      string `json:"kernel"`     // guest kernel directory
	KernelPkg   string `json:"kernel_pkg"` // its Debian package and version
	Err         error  `json:"-"`          // why the backend cannot run (wraps a sandbox error kind)
	kernel      kernelFiles
}
