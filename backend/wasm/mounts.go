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

	"github.com/airlock-dev/airlock/sandbox"
)

// mount is one preopened directory: host directory host seen at guest.
type mount struct {
	guest    string // absolute, cleaned guest path
	host     string
	root     *os.Root
	readOnly bool
	deny     []string // cleaned paths relative to host
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
// replaces an earlier one only when it is read-write (never widens a
// read-only grant of the same path by accident: RW must be explicit).
func (t *mountTable) add(guest, host string, readOnly bool, deny []string) error {
	root, err := os.OpenRoot(host)
	if err != nil {
		return err
	}
	m := &mount{guest: path.Clean("/" + filepath.ToSlash(guest)), host: host, root: root, readOnly: readOnly}
	for _, d := range deny {
		rel, err := filepath.Rel(host, d)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		m.deny = append(m.deny, filepath.ToSlash(rel))
	}
	for i, old := range t.mounts {
		if old.guest == m.guest {
			if !readOnly {
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

// fsConfig is the WASI preopen configuration of the table.
func (t *mountTable) fsConfig() wazero.FSConfig {
	cfg := wazero.NewFSConfig().(sysfs.FSConfig)
	// Shortest first, so the guest's fd 3 is the outermost directory.
	for i := len(t.mounts) - 1; i >= 0; i-- {
		m := t.mounts[i]
		cfg = cfg.WithSysFSMount(&rootFS{root: m.root, readOnly: m.readOnly, deny: m.deny}, m.guest).(sysfs.FSConfig)
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
		if denied(m.deny, rel) {
			return nil, "", fmt.Errorf("path %q: denied by policy: %w", p, sandbox.ErrPermission)
		}
		return m, rel, nil
	}
	return nil, "", fmt.Errorf("path %q: %w: %w", p, errOutside, sandbox.ErrNotFound)
}
