package guestkernel

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Module is one kernel module file.
type Module struct {
	Name    string   // canonical name (dashes as underscores)
	Path    string   // path below the modules root, e.g. kernel/fs/9p/9p.ko
	Depends []string // from its .modinfo "depends="
}

// ModName is a module's canonical name from its file name.
func ModName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".ko"), "-", "_")
}

// Index reads every .ko below root (lib/modules/VERSION of the unpacked
// package) and returns them by canonical name.
func Index(fsys fs.FS) (map[string]Module, error) {
	mods := map[string]Module{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 64<<20))
		if err != nil {
			return err
		}
		deps, err := ModinfoDepends(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		mods[ModName(p)] = Module{Name: ModName(p), Path: p, Depends: deps}
		return nil
	})
	return mods, err
}

// ModinfoDepends returns the "depends=" list of a module's .modinfo section.
func ModinfoDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, fmt.Errorf("not ELF: %w", err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// LoadOrder returns want and everything it depends on, each after its
// dependencies (ties broken by name, so the order is reproducible).
func LoadOrder(mods map[string]Module, want []string) ([]Module, error) {
	var out []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, name), " -> "))
		}
		m, ok := mods[name]
		if !ok {
			if len(chain) == 0 {
				return fmt.Errorf("module %s: not in the package", name)
			}
			return fmt.Errorf("module %s (needed by %s): not in the package", name, chain[len(chain)-1])
		}
		state[name] = 1
		deps := append([]string{}, m.Depends...)
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		out = append(out, m)
		return nil
	}
	for _, w := range want {
		if err := visit(w, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Wanted are the modules the guest loads (with their dependencies): the
// virtio-mmio transport, the agent's channel (virtio-serial; vsock under
// Firecracker), 9p for the shared directories, overlay for the protected
// workspace's writable layer, and virtio-rng for early entropy.
var Wanted = []string{
	"virtio_mmio", "virtio_console", "9pnet_virtio", "9p", "overlay",
	"vmw_vsock_virtio_transport", "virtio_rng",
}

// Manifest describes a prepared kernel directory (kernel.json).
type Manifest struct {
	Package   string   `json:"package"`    // Debian package name
	Version   string   `json:"version"`    // its version
	DebSHA256 string   `json:"deb_sha256"` // checksum of the .deb, as pinned
	Release   string   `json:"release"`    // uname -r of the guest kernel
	Vmlinux   string   `json:"vmlinux"`    // file name of the ELF kernel
	VmlinuxSH string   `json:"vmlinux_sha256"`
	Modules   []string `json:"modules"` // file names in modules/, in load order
}
