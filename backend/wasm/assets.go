package wasm

import (
	"os"
	"path/filepath"
)

// asset is an interpreter build installed by `make wasm-assets`.
type asset struct {
	name string // command name in Exec
	file string // file name in the asset directory
	kind kind
}

// builtinAssets are the registered interpreter commands.
var builtinAssets = []asset{
	{name: "ruby", file: "ruby.wasm", kind: kindRuby},
}

// assetDir returns the asset directory and where that choice came from.
func (b *Backend) assetDir() (dir, source string) {
	if b.cfg.AssetDir != "" {
		return b.cfg.AssetDir, "config"
	}
	if d := os.Getenv("AIRLOCK_WASM_DIR"); d != "" {
		return d, "$AIRLOCK_WASM_DIR"
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Join(filepath.Dir(filepath.Dir(exe)), "var", "wasm")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, "beside the binary"
		}
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join("var", "wasm"), "working directory"
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "airlock", "wasm"), "data home"
}

// lookupCommand maps a registered name to a host module path.
func (b *Backend) lookupCommand(name string) (path string, k kind, ok bool) {
	if p, ok := b.cfg.Commands[name]; ok {
		return p, kindCommand, true
	}
	for _, a := range builtinAssets {
		if a.name == name {
			dir, _ := b.assetDir()
			return filepath.Join(dir, a.file), a.kind, true
		}
	}
	return "", 0, false
}
