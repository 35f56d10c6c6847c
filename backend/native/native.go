package native

import (
	"github.com/airlock-dev/airlock/backend/internal/idmap"

	"log/slog"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
)

// Config configures the native backend.
type Config struct {
	// AgentBinary is the airlock binary started as each sandbox's init.
	// Empty means /proc/self/exe (this binary).
	AgentBinary string
	// Log is the backend's logger; nil discards.
	Log *slog.Logger
	// StateDir holds per-sandbox state (placeholders to remove) so that
	// Cleanup can undo a crashed host's work. Empty: /run/airlock/native as
	// root, $XDG_RUNTIME_DIR/airlock/native (or the temp dir) otherwise.
	StateDir string
	// CgroupParent is the cgroup (path relative to each hierarchy's root)
	// under which sandbox cgroups are made. Empty: "airlock" next to our
	// own cgroup on v2, "airlock" at each v1 controller's root.
	CgroupParent string
	// HostIDs, when set, gives every sandbox a leased range of host uids
	// and gids: ids 0..65535 inside map onto it, so nothing inside is
	// ever a host user (root included). Nil: the caller's uid and gid
	// are mapped 1:1 (airlock run). Only for a root caller.
	HostIDs *idmap.Source
	// WritableDir holds image sandboxes' writable layers, one directory
	// each (see internal/imageroot). Cleanup removes those of sandboxes
	// not alive in StateDir, so one WritableDir belongs to one StateDir.
	// Empty: StateDir/rw when StateDir is given, else the default
	// state's own, DataDir/native/rw (/var/lib/airlock/native/rw as
	// root: on disk, not in memory).
	WritableDir string
}

// Name is the policy name of this backend.
const Name = "native"

// InitCommand is the hidden subcommand that runs a sandbox's init.
const InitCommand = "__native-init"

// Backend is the native sandbox backend. Create it with New.
type Backend struct {
	cfg Config
	log *slog.Logger
	// features reports the host's features; tests replace it to prove
	// the fail-closed and degraded paths.
	features func() Features
}

// New returns the native backend.
func New(cfg Config) *Backend {
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = "/proc/self/exe"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.WritableDir == "" {
		cfg.WritableDir = hostfs.WritableDir(Name, cfg.StateDir) // before StateDir's default: not under /run
	}
	if cfg.StateDir == "" {
		cfg.StateDir = hostfs.StateDir(Name)
	}
	return &Backend{cfg: cfg, log: cfg.Log.With("backend", Name), features: HostFeatures}
}

// Name returns "native".
func (b *Backend) Name() string { return Name }
