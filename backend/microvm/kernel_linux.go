package microvm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/backend/microvm/internal/guestkernel"
	"github.com/airlock-dev/airlock/sandbox"
)

// kernelFiles is a prepared guest kernel directory.
type kernelFiles struct {
	Dir      string
	Vmlinux  string
	Modules  []string // paths, in load order
	Manifest guestkernel.Manifest
}

// kernelDir returns the guest kernel directory and where that choice came
// from (the same search as the wasm backend's assets).
func (b *Backend) kernelDir() (dir, source string) {
	if b.cfg.KernelDir != "" {
		return b.cfg.KernelDir, "config"
	}
	if d := os.Getenv("AIRLOCK_MICROVM_DIR"); d != "" {
		return filepath.Join(d, "kernel"), "$AIRLOCK_MICROVM_DIR"
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Join(filepath.Dir(filepath.Dir(exe)), "var", "microvm", "kernel")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, "beside the binary"
		}
	}
	if exe, err := filepath.EvalSymlinks(b.cfg.AgentBinary); err == nil {
		d := filepath.Join(filepath.Dir(filepath.Dir(exe)), "var", "microvm", "kernel")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, "beside the agent binary"
		}
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join("var", "microvm", "kernel"), "working directory"
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "airlock", "microvm", "kernel"), "data home"
}

// loadKernel reads and checks the kernel directory.
func (b *Backend) loadKernel() (kernelFiles, error) {
	dir, source := b.kernelDir()
	k := kernelFiles{Dir: dir}
	raw, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return k, fmt.Errorf("guest kernel (%s, from %s): %v (run `make guest-kernel`, or set $AIRLOCK_MICROVM_DIR): %w", dir, source, err, sandbox.ErrUnavailable)
	}
	if err := json.Unmarshal(raw, &k.Manifest); err != nil {
		return k, fmt.Errorf("guest kernel %s/kernel.json: %v: %w", dir, err, sandbox.ErrUnavailable)
	}
	k.Vmlinux = filepath.Join(dir, k.Manifest.Vmlinux)
	if _, err := os.Stat(k.Vmlinux); err != nil || k.Manifest.Vmlinux == "" {
		return k, fmt.Errorf("guest kernel %s: no vmlinux: %w", dir, sandbox.ErrUnavailable)
	}
	for _, m := range k.Manifest.Modules {
		p := filepath.Join(dir, "modules", filepath.Base(m))
		if _, err := os.Stat(p); err != nil {
			return k, fmt.Errorf("guest kernel %s: module %s: %v: %w", dir, m, err, sandbox.ErrUnavailable)
		}
		k.Modules = append(k.Modules, p)
	}
	return k, nil
}
