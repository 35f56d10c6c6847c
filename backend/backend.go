// Package backend maps backend names to implementations, so the CLI and the
// server open backends one way. It must never hold backend logic itself.
package backend

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/backend/gvisor"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/kubernetes"
	"github.com/airlock-dev/airlock/backend/microvm"
	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/backend/wasm"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
)

// Options configure every backend opened through Open.
type Options struct {
	// AgentBinary is the airlock binary run as the in-sandbox agent; empty
	// means this process's executable.
	AgentBinary string
	// StateDir holds backend state (runsc root, caches); empty: defaults.
	StateDir string
	// CgroupParent is where native and gvisor make sandbox cgroups (and
	// what their Cleanup sweeps); empty: each backend's default. A server
	// sets its own so that its crash recovery never touches sandboxes of
	// another airlock process.
	CgroupParent string
	// HostIDs gives native, gVisor and docker sandboxes host uid/gid
	// ranges of their own (ids 0..65535 inside map onto a leased range, so
	// no sandbox process is ever a host user; docker's container runs as
	// the range's ids, without a user namespace): "" keeps the caller's ids
	// (airlock run), "auto" uses airlock's reserved range, "user:NAME"
	// NAME's /etc/subuid and /etc/subgid entries. Only as root.
	HostIDs string
	// Images is airlock's image store: the docker backend loads an image
	// from it into the daemon when a sandbox names one (nil: the
	// daemon's images only).
	Images *images.Store
	// Kubernetes configures the kubernetes backend (kubeconfig,
	// namespace, runtime class, image, the nodes' airlock, warm pool);
	// its Owner and Log are set by Open.
	Kubernetes kubernetes.Config
	Log        *slog.Logger
}

// Isolation levels, weakest first; `auto` picks the fastest backend meeting
// the requested one.
var isolationRank = map[string]int{"weak": 0, "kernel": 1, "medium": 2, "wasm": 2, "hardware": 3}

// Names lists the backends this build knows, in order of start-up speed
// (the order `auto` tries them).
func Names() []string { return []string{"native", "gvisor", "docker", "wasm", "microvm"} }

// Remote lists the backends that place sandboxes off this host: opened
// only when named (never by auto, nor offered by default by a server),
// since probing them means reaching a cluster.
func Remote() []string { return []string{kubernetes.Name} }

// Open returns the backend called name ("" means native).
func Open(name string, opts Options) (sandbox.Backend, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var ids *idmap.Source
	if name == "" || name == "native" || name == "gvisor" || name == "docker" {
		var err error
		if ids, err = HostIDs(opts.HostIDs); err != nil {
			return nil, err
		}
	}
	switch name {
	case "", "native":
		return native.New(native.Config{AgentBinary: opts.AgentBinary, Log: opts.Log, StateDir: sub(opts.StateDir, "native"), CgroupParent: cgroupSub(opts.CgroupParent, "native"), HostIDs: ids}), nil
	case "gvisor":
		return gvisor.New(gvisor.Config{AgentBinary: opts.AgentBinary, Log: opts.Log, StateDir: sub(opts.StateDir, "gvisor"), CgroupParent: cgroupSub(opts.CgroupParent, "gvisor"), HostIDs: ids}), nil
	case "docker":
		// Owner plays the cgroup parent's part: Cleanup removes only the
		// containers labelled with it.
		cfg := docker.Config{AgentBinary: opts.AgentBinary, Log: opts.Log, StateDir: sub(opts.StateDir, "docker"), Owner: cgroupSub(opts.CgroupParent, "docker"), HostIDs: ids}
		if opts.Images != nil {
			cfg.Images = opts.Images
		}
		return docker.New(cfg), nil
	case "wasm":
		return wasm.New(wasm.Config{Log: opts.Log}), nil
	case kubernetes.Name:
		cfg := opts.Kubernetes
		cfg.Log = opts.Log
		if cfg.Owner == "" {
			cfg.Owner = cgroupSub(opts.CgroupParent, kubernetes.Name)
		}
		return kubernetes.New(cfg), nil
	case "microvm":
		return microvm.New(microvm.Config{AgentBinary: opts.AgentBinary, Log: opts.Log, StateDir: sub(opts.StateDir, "microvm"), CgroupParent: cgroupSub(opts.CgroupParent, "microvm")}), nil
	}
	return nil, fmt.Errorf("backend %q: unknown (known: %s, auto): %w", name, strings.Join(append(Names(), Remote()...), ", "), sandbox.ErrInvalid)
}

// Auto returns the first available backend (in Names order) whose isolation
// is at least isolation ("" means kernel). wasm is never chosen
// automatically: it only runs WASI programs.
func Auto(ctx context.Context, isolation string, opts Options) (sandbox.Backend, error) {
	if isolation == "" {
		isolation = "kernel"
	}
	want, ok := isolationRank[isolation]
	if !ok {
		return nil, fmt.Errorf("isolation %q: unknown (weak, kernel, medium, hardware): %w", isolation, sandbox.ErrInvalid)
	}
	var why []string
	for _, name := range Names() {
		if name == "wasm" {
			continue
		}
		b, err := Open(name, opts)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		p := b.Probe(ctx)
		switch {
		case !p.Available:
			why = append(why, fmt.Sprintf("%s: %s", name, p.Reason))
		case isolationRank[p.Isolation] < want:
			why = append(why, fmt.Sprintf("%s: isolation %s is below %s", name, p.Isolation, isolation))
		default:
			return b, nil
		}
	}
	return nil, fmt.Errorf("no backend with isolation %s on this host (%s): %w", isolation, strings.Join(why, "; "), sandbox.ErrUnavailable)
}

// sub is dir/name, or "" (the backend's default) when dir is empty.
func sub(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// cgroupSub names a backend's own cgroup parent next to (not under) parent:
// a flat name needs no controller delegation through an extra level.
func cgroupSub(parent, name string) string {
	if parent == "" {
		return ""
	}
	return parent + "-" + name
}

// HostIDs opens the host id source spec names (see Options.HostIDs): nil
// for "". Leases are shared with every airlock process on the host
// through lock files in the host state directory.
func HostIDs(spec string) (*idmap.Source, error) {
	lockDir := hostfs.StateDir("idmap")
	switch {
	case spec == "":
		return nil, nil
	case spec == "auto":
		return idmap.Default(lockDir)
	case strings.HasPrefix(spec, "user:") && len(spec) > len("user:"):
		return idmap.ForUser(strings.TrimPrefix(spec, "user:"), lockDir)
	}
	return nil, fmt.Errorf("host ids %q: want auto or user:NAME: %w", spec, sandbox.ErrInvalid)
}

// DescribeHostIDs says which ranges spec leases from, for doctor.
func DescribeHostIDs(spec string) (string, error) {
	s, err := HostIDs(spec)
	if err != nil || s == nil {
		return "", err
	}
	return s.What, nil
}
