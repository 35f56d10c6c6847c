// Package backend maps backend names to implementations, so the CLI and the
// server open backends one way. Backends register themselves (Register, from
// an init of their own package), so a binary links exactly the backends it
// imports: the default build imports backend/builtin, and only the
// airlock-kube build adds the Kubernetes backend. It must never hold backend
// logic itself, nor import a backend.
package backend

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
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
	// NAME's /etc/subuid and /etc/subgid entries. As root; without root
	// only native uses it, with the caller's own user:NAME (its maps
	// written by newuidmap and newgidmap, `airlock run --image`).
	HostIDs string
	// Images is airlock's image store: the docker backend loads an image
	// from it into the daemon when a sandbox names one (nil: the
	// daemon's images only).
	Images *images.Store
	Log    *slog.Logger
}

// Env is what a backend's factory gets: the Options with the paths made
// the backend's own (StateDir and CgroupParent name it) and the host id
// source opened when the factory asked for one.
type Env struct {
	Options
	// IDs is the host id source of Options.HostIDs (nil: the caller's
	// ids); set only for factories with HostIDs.
	IDs *idmap.Source
}

// Factory is one backend as it registers itself.
type Factory struct {
	// Name is the backend's policy name (policy.Backends lists them all).
	Name string
	// Rank orders local backends by start-up speed, fastest first: the
	// order doctor lists them and auto tries them.
	Rank int
	// Remote backends place sandboxes off this host: opened only when
	// named (never by auto, nor offered by default by a server), since
	// probing them means reaching a cluster.
	Remote bool
	// HostIDs: the backend runs sandboxes as leased host ids (Env.IDs).
	HostIDs bool
	// Flags, when set, adds the backend's own `airlock serve` flags to fs;
	// Open reads what they were set to.
	Flags func(fs *flag.FlagSet)
	// Open returns the backend; it must not reach the host beyond reading
	// its settings (Probe does that).
	Open func(Env) (sandbox.Backend, error)
}

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register adds f. It panics on a duplicate or incomplete registration: that
// is a build mistake, found by the first test.
func Register(f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if f.Name == "" || f.Open == nil {
		panic("backend: Register needs a name and an Open")
	}
	if _, dup := factories[f.Name]; dup {
		panic("backend: " + f.Name + " registered twice")
	}
	factories[f.Name] = f
}

// Names lists the local backends this build has, in order of start-up
// speed (the order `auto` tries them).
func Names() []string { return list(false) }

// Remote lists the remote backends this build has (see Factory.Remote).
func Remote() []string { return list(true) }

func list(remote bool) []string {
	mu.RLock()
	defer mu.RUnlock()
	var fs []Factory
	for _, f := range factories {
		if f.Remote == remote {
			fs = append(fs, f)
		}
	}
	slices.SortFunc(fs, func(a, b Factory) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// Has reports whether this build has the backend called name.
func Has(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	_, ok := factories[name]
	return ok
}

// RegisterFlags adds every registered backend's serve flags to fs.
func RegisterFlags(fs *flag.FlagSet) {
	mu.RLock()
	defer mu.RUnlock()
	for _, name := range append(list(false), list(true)...) {
		if f := factories[name]; f.Flags != nil {
			f.Flags(fs)
		}
	}
}

// ErrNotInBuild is returned (wrapped, with sandbox.ErrUnavailable) by Open
// for a backend that policies know but this binary does not link.
var ErrNotInBuild = fmt.Errorf("not in this build")

// Open returns the backend called name ("" means native).
func Open(name string, opts Options) (sandbox.Backend, error) {
	if name == "" {
		name = "native"
	}
	mu.RLock()
	f, ok := factories[name]
	mu.RUnlock()
	if !ok {
		if name == "kubernetes" {
			return nil, fmt.Errorf("backend %q: %w: it lives in the airlock-kube binary (make build makes bin/airlock-kube; airlock serve --backend kubernetes runs it when it is beside airlock): %w", name, ErrNotInBuild, sandbox.ErrUnavailable)
		}
		return nil, fmt.Errorf("backend %q: unknown (known: %s, auto): %w", name, strings.Join(append(Names(), Remote()...), ", "), sandbox.ErrInvalid)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	env := Env{Options: opts}
	env.StateDir = sub(opts.StateDir, name)
	env.CgroupParent = cgroupSub(opts.CgroupParent, name)
	if f.HostIDs {
		var err error
		if env.IDs, err = HostIDs(opts.HostIDs); err != nil {
			return nil, err
		}
	}
	return f.Open(env)
}

// Isolation levels, weakest first; `auto` picks the fastest backend meeting
// the requested one.
var isolationRank = map[string]int{"weak": 0, "kernel": 1, "medium": 2, "wasm": 2, "hardware": 3}

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

// DescribeHostIDs says which ranges spec leases from, for doctor; as a
// normal user, whose maps newuidmap and newgidmap write, also whether
// they are there.
func DescribeHostIDs(spec string) (string, error) {
	s, err := HostIDs(spec)
	if err != nil || s == nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		if _, _, err := idmap.Tools(); err != nil {
			return "", err
		}
	}
	return s.What, nil
}
