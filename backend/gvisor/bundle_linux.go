package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/agent"
	"github.com/airlock-dev/airlock/policy"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/backend/internal/rootcaps"
)

// writeBundle creates the bundle directory contents for plan: the root
// skeleton (mount points and top-level links, nothing else), the deny
// objects, the injected files, the placeholder record for Cleanup and
// config.json. dir must exist and be empty.
func writeBundle(dir string, spec *ociSpec, plan *mountPlan) error {
	root := filepath.Join(dir, bundleRootfs)
	if !plan.Image { // an image's root is mounted there already
		if err := os.Mkdir(root, 0o755); err != nil {
			return err
		}
	}
	for name, target := range plan.Links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(dir, bundleDenyDir), 0); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, bundleDenyFile), nil, 0); err != nil {
		return err
	}
	// WriteFile and Mkdir honour the umask; the deny objects must be 000.
	for _, n := range []string{bundleDenyDir, bundleDenyFile} {
		if err := os.Chmod(filepath.Join(dir, n), 0); err != nil {
			return err
		}
	}
	if len(plan.Files) > 0 {
		if err := os.Mkdir(filepath.Join(dir, bundleFiles), 0o755); err != nil {
			return err
		}
		for i, f := range plan.Files {
			mode := os.FileMode(f.Mode & 0o777)
			if mode == 0 {
				mode = 0o444
			}
			p := filepath.Join(dir, bundleFiles, strconv.Itoa(i))
			if err := os.WriteFile(p, f.Data, 0o600); err != nil {
				return err
			}
			if err := os.Chmod(p, mode&^0o222); err != nil {
				return err
			}
		}
	}
	// Mount points that live in the skeleton itself (not under another mount).
	var dests []string
	for _, m := range spec.Mounts {
		dests = append(dests, m.Destination)
	}
	for _, m := range spec.Mounts {
		if underOther(m.Destination, dests) || plan.RuntimeMountPoints {
			continue
		}
		isDir := true
		if m.Type == "bind" {
			fi, err := os.Stat(m.Source)
			if err != nil {
				return fmt.Errorf("mount source %s: %w", m.Source, err)
			}
			isDir = fi.IsDir()
		}
		if err := mountPoint(root, m.Destination, isDir); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Destination, err)
		}
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// underOther reports whether p lies below another destination in dests.
func underOther(p string, dests []string) bool {
	for _, d := range dests {
		if d != p && (d == "/" || strings.HasPrefix(p, d+"/")) {
			return true
		}
	}
	return false
}

// mountPoint creates dst (a directory, or an empty file) inside root,
// creating missing parents. It never follows a symlink: a path through one
// of the skeleton's top-level links is left for the sandbox to resolve, so
// nothing is ever created outside root.
func mountPoint(root, dst string, isDir bool) error {
	parts := strings.Split(strings.Trim(dst, "/"), "/")
	cur := root
	for i, part := range parts {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("bad path %q", dst)
		}
		cur = filepath.Join(cur, part)
		last := i == len(parts)-1
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return nil
		case err == nil:
			continue
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if last && !isDir {
			return os.WriteFile(cur, nil, 0o444)
		}
		if err := os.Mkdir(cur, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// readPlaceholders returns the workspace placeholders an earlier version
// recorded in a bundle (Cleanup removes them while still theirs).
func readPlaceholders(dir string) []hostfs.Placeholder {
	b, err := os.ReadFile(filepath.Join(dir, "placeholders.json"))
	if err != nil {
		return nil
	}
	var ph []hostfs.Placeholder
	if json.Unmarshal(b, &ph) != nil {
		return nil
	}
	return ph
}

// specInput is the non-filesystem part of a sandbox's OCI spec.
type specInput struct {
	ID       string
	Policy   *policy.Policy
	UID, GID int
	Mounts   []ociMount
	Lease    *idmap.Lease // host ids of the sandbox's user namespace, or nil
	// RootCaps: root inside keeps rootcaps.Set (effective, permitted and
	// bounding; nothing inheritable or ambient), capabilities of gVisor's
	// kernel over the sandbox's own ids.
	RootCaps bool
	// EnvironPrivate: this runsc keeps /proc/1/environ from the sandbox's
	// processes (Info.environPrivate).
	EnvironPrivate bool
}

// agentArgs is the container's process: the agent.
func agentArgs(environPrivate bool) []string {
	if environPrivate {
		return []string{AgentPath, "agent", "serve", agent.EnvironPrivateFlag}
	}
	return []string{AgentPath, "agent", "serve"}
}

// buildSpec makes the OCI spec: the agent as the only process, no
// capabilities, no new privileges, the policy's limits as rlimits, fresh
// namespaces, a read-only skeleton root. Memory and CPU limits are the
// backend's own cgroup (see cgroup_linux.go), not linux.resources: runsc
// runs with --ignore-cgroups.
func buildSpec(in specInput) *ociSpec {
	l := in.Policy.Limits
	s := &ociSpec{
		Version:  "1.0.2",
		Hostname: "airlock",
		Root:     ociRoot{Path: bundleRootfs, Readonly: true},
		Mounts:   in.Mounts,
		Process: ociProcess{
			User: ociUser{UID: uint32(in.UID), GID: uint32(in.GID)},
			Args: agentArgs(in.EnvironPrivate),
			// The agent trusts only the Hello config; this is for itself.
			Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Cwd:             "/",
			Capabilities:    ociCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			NoNewPrivileges: true,
			Rlimits:         []ociRlimit{{Type: "RLIMIT_CORE"}},
		},
		Linux: ociLinux{
			Namespaces: []ociNamespace{{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}},
			Seccomp:    seccompProfile(),
		},
	}
	if in.Lease != nil {
		// runsc, its gofer included, runs in a user namespace whose ids
		// 0..65535 are the leased host range: nothing it does on the host
		// is done as a host user.
		s.Linux.Namespaces = append(s.Linux.Namespaces, ociNamespace{Type: "user"})
		s.Linux.UIDMappings = []ociIDMapping{{ContainerID: 0, HostID: uint32(in.Lease.UID), Size: uint32(in.Lease.Count)}}
		s.Linux.GIDMappings = []ociIDMapping{{ContainerID: 0, HostID: uint32(in.Lease.GID), Size: uint32(in.Lease.Count)}}
	}
	if in.RootCaps {
		c := rootcaps.Names()
		s.Process.Capabilities = ociCapabilities{Bounding: c, Effective: c, Permitted: slices.Clone(c), Inheritable: []string{}, Ambient: []string{}}
	}
	if n := l.OpenFiles; n > 0 {
		s.Process.Rlimits = append(s.Process.Rlimits, ociRlimit{Type: "RLIMIT_NOFILE", Hard: uint64(n), Soft: uint64(n)})
	}
	// gVisor's kernel enforces RLIMIT_NPROC per user over its own tasks;
	// a host pids cgroup limit would count the sentry's threads instead.
	if n := l.Pids; n > 0 {
		s.Process.Rlimits = append(s.Process.Rlimits, ociRlimit{Type: "RLIMIT_NPROC", Hard: uint64(n), Soft: uint64(n)})
	}
	return s
}
