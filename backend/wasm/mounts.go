package wasm

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// mount is one preopened directory: host directory host seen at guest.
type mount struct {
	guest    string // absolute, cleaned guest path
	host     string
	root     *os.Root
	readOnly bool
	private  bool // a directory this sandbox made (its layout is ours)
	rules    mountRules
	quota    *quota // nil: no disk limit
}

// mountOpts says how to mount a directory.
type mountOpts struct {
	readOnly bool
	private  bool
	deny     []string            // absolute host paths
	guard    *policy.ConfigGuard // writes to host mounts; nil: none
	report   func(policy.Denial)
	disk     int64 // bytes the guest may write into it; 0: no limit
}

// mountTable is a sandbox's filesystem view. Longest guest prefix wins, as
// in wazero's preopen lookup.
type mountTable struct {
	mounts []*mount // sorted by guest path, longest first
}

func (t *mountTable) close() {
	for _, m := range t.mounts {
		m.root.Close()
	}
}

// add opens host as a mount at guest. A later mount at the same guest path
// replaces an earlier one only when it is read-write (read-write must be
// explicit, it never comes from a read-only grant of the same path).
func (t *mountTable) add(guest, host string, o mountOpts) error {
	root, err := os.OpenRoot(host)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		real = ""
	}
	m := &mount{
		guest:    path.Clean("/" + filepath.ToSlash(guest)),
		host:     host,
		root:     root,
		readOnly: o.readOnly,
		private:  o.private,
		rules:    mountRules{deny: relRules(host, o.deny), real: real, report: o.report},
	}
	if o.disk > 0 && !o.readOnly {
		m.quota = &quota{limit: o.disk}
	}
	if !o.private && !o.readOnly {
		m.rules.guard = o.guard
	}
	for i, old := range t.mounts {
		if old.guest == m.guest {
			if !o.readOnly {
				old.root.Close()
				t.mounts[i] = m
			} else {
				root.Close()
			}
			return nil
		}
	}
	t.mounts = append(t.mounts, m)
	sort.SliceStable(t.mounts, func(i, j int) bool { return len(t.mounts[i].guest) > len(t.mounts[j].guest) })
	return nil
}

// has reports whether a mount sits exactly at guest.
func (t *mountTable) has(guest string) bool {
	for _, m := range t.mounts {
		if m.guest == guest {
			return true
		}
	}
	return false
}

// scaffold creates, inside each private mount, the directories leading to
// the mounts nested in it, so that walking a path component by component
// (realpath, require_relative, os.Getwd) finds every mount point, as in a
// container's root filesystem. Host mounts already have them: they are
// seen at their host paths.
func (t *mountTable) scaffold() error {
	for _, outer := range t.mounts {
		if !outer.private {
			continue
		}
		for _, inner := range t.mounts {
			if inner == outer || !under(inner.guest, outer.guest) {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(inner.guest, outer.guest), "/")
			if err := outer.root.MkdirAll(rel, 0o755); err != nil {
				return fmt.Errorf("make mount point %s: %w", inner.guest, err)
			}
		}
	}
	return nil
}

// under reports whether p is strictly inside dir (both clean, absolute).
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// fsConfig is the WASI preopen configuration of the table for one process
// holding at most fds open files.
func (t *mountTable) fsConfig(fds *fdBudget) wazero.FSConfig {
	cfg := wazero.NewFSConfig().(sysfs.FSConfig)
	// Shortest first, so the guest's fd 3 is the outermost directory.
	for i := len(t.mounts) - 1; i >= 0; i-- {
		m := t.mounts[i]
		cfg = cfg.WithSysFSMount(&rootFS{m: m, fds: fds}, m.guest).(sysfs.FSConfig)
	}
	return cfg.(wazero.FSConfig)
}

// errOutside marks a path no mount covers.
var errOutside = errors.New("outside the sandbox's filesystem")

// resolve maps an absolute guest path to its mount and the path relative
// to it, refusing relative paths, denied paths and paths outside every
// mount. ".." is cleaned lexically first, as the guest's libc does.
func (t *mountTable) resolve(p string) (*mount, string, error) {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return nil, "", fmt.Errorf("path %q: must be absolute: %w", p, sandbox.ErrInvalid)
	}
	clean := path.Clean(p)
	for _, m := range t.mounts {
		var rel string
		switch {
		case m.guest == "/":
			rel = strings.TrimPrefix(clean, "/")
		case clean == m.guest:
			rel = ""
		case strings.HasPrefix(clean, m.guest+"/"):
			rel = clean[len(m.guest)+1:]
		default:
			continue
		}
		if rel == "" {
			rel = "."
		}
		if denied(m.rules.deny, path.Clean(rel)) {
			return nil, "", fmt.Errorf("path %q: denied by policy: %w", p, sandbox.ErrPermission)
		}
		return m, rel, nil
	}
	return nil, "", fmt.Errorf("path %q: %w: %w", p, errOutside, sandbox.ErrNotFound)
}
