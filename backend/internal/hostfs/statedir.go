package hostfs

import (
	"os"
	"path/filepath"
	"strconv"
)

// StateDir is the default per-backend state directory (records of what a
// sandbox left on the host, for Cleanup after a crash): under /run as root,
// else under $XDG_RUNTIME_DIR, else a per-uid directory in the temp dir.
func StateDir(backend string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/run/airlock", backend)
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "airlock", backend)
	}
	return filepath.Join(os.TempDir(), "airlock-"+strconv.Itoa(os.Geteuid()), backend)
}

// DataDir is the default per-backend directory for data that must live on
// disk rather than in memory (image sandboxes' writable layers): under
// /var/lib/airlock as root, else under $XDG_DATA_HOME/airlock
// (~/.local/share/airlock).
func DataDir(backend string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/var/lib/airlock", backend)
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "airlock", backend)
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "airlock", backend)
	}
	return filepath.Join(os.TempDir(), "airlock-"+strconv.Itoa(os.Geteuid()), "data", backend)
}

// WritableDir is the default directory of image sandboxes' writable
// layers for a backend whose state dir is stateDir ("" for the default):
// beside that state (a backend's Cleanup sweeps the layers its own state
// does not know, so no two state dirs may share one), on disk.
func WritableDir(backend, stateDir string) string {
	if stateDir != "" {
		return filepath.Join(stateDir, "rw")
	}
	return filepath.Join(DataDir(backend), "rw")
}
