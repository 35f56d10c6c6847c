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
