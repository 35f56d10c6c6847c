package docker

import (
	"context"
	"log/slog"
	"os"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/images"
)

// Name is the policy name of this backend.
const Name = "docker"

// AgentPath is where the airlock binary appears inside every container.
const AgentPath = "/.airlock/airlock"

// Labels every container and volume of this backend carries.
const (
	LabelSandbox = "dev.airlock.sandbox" // the sandbox ID
	LabelOwner   = "dev.airlock.owner"   // Config.Owner: whose Cleanup may remove it
	LabelBackend = "dev.airlock.backend" // "docker"
)

// Config configures the Docker backend.
type Config struct {
	// Host is the daemon's address (unix:///var/run/docker.sock). Empty:
	// $DOCKER_HOST, else the default socket.
	Host string
	// AgentBinary is the airlock binary bind-mounted read-only into each
	// container and started there as `airlock agent serve`. Empty: this
	// process's executable.
	AgentBinary string
	// StateDir holds one directory per sandbox (injected files, deny
	// objects, overlay upper layers). Empty: /run/airlock/docker as root.
	StateDir string
	// Owner is written on every container and volume (LabelOwner);
	// Cleanup removes only those of its own owner. Give each independent
	// airlock process (a server, a test) its own. Empty: "airlock".
	Owner string
	// Images is airlock's image store (images.Store): an image a sandbox
	// names that the store holds is loaded from it into the daemon (once,
	// under a tag of its own), so one name works on every backend. Nil:
	// the daemon's images only.
	Images ImageSource
	// HostIDs, when set (a server as root), gives every sandbox a leased
	// range of host ids: its processes run as the range's uid for the
	// policy's uid (0: the range's first), never as a host user or host
	// root, and its workspace is given to it. Without user namespace
	// remapping in the daemon the container's ids are the host's.
	HostIDs *idmap.Source
	// Log is the backend's logger; nil discards.
	Log *slog.Logger
}

// ImageSource is where images that are not the daemon's come from:
// airlock's image store (*images.Store).
type ImageSource interface {
	// V1Image returns the stored image ref names, or ErrNotFound.
	V1Image(ctx context.Context, ref string) (v1.Image, *images.Image, error)
}

// Backend is the Docker sandbox backend. Create it with New. It is safe for
// concurrent use.
type Backend struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	conn *engine // the daemon client, made on first use
	info *Info   // what the daemon offers, found once

	baseOnce    sync.Mutex    // serialises making the base image
	loadMu      sync.Mutex    // serialises loading store images into the daemon
	reclaimOnce sync.Once     // dead sandboxes' containers, reclaimed at the first create
	reclaimed   chan struct{} // closed once that reclaim has finished
}

// New returns the Docker backend. It does not contact the daemon yet.
func New(cfg Config) *Backend {
	if cfg.Host == "" {
		cfg.Host = os.Getenv("DOCKER_HOST")
	}
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = "/proc/self/exe"
		if p, err := os.Executable(); err == nil {
			cfg.AgentBinary = p
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = hostfs.StateDir(Name)
	}
	if cfg.Owner == "" {
		cfg.Owner = "airlock"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: cfg.Log.With("backend", Name), reclaimed: make(chan struct{})}
}

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// Info is what the daemon offers, for Probe and `airlock doctor`.
type Info struct {
	Host          string   `json:"host,omitempty"`
	Version       string   `json:"version,omitempty"`     // dockerd's version
	APIVersion    string   `json:"api_version,omitempty"` // the negotiated API version
	CgroupDriver  string   `json:"cgroup_driver,omitempty"`
	CgroupVersion string   `json:"cgroup_version,omitempty"`
	Security      []string `json:"security_options,omitempty"` // as dockerd lists them (seccomp, apparmor, userns, rootless)
	UsernsRemap   bool     `json:"userns_remap"`               // containers' root is an unprivileged host uid
	Rootless      bool     `json:"rootless"`
	Seccomp       bool     `json:"seccomp"` // the daemon applies seccomp profiles
	Runtime       string   `json:"runtime,omitempty"`
	Err           error    `json:"-"` // why the backend cannot run (wraps a sandbox error kind)
}
