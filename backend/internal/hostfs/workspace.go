package hostfs

import (
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/sandbox"
)

// OwnWorkspace gives the workspace of spec to uid:gid when it was made for
// this sandbox alone (spec.OwnWorkspace): a sandbox running as host ids of
// its own must be able to write it. A user's own workspace is never
// touched.
func OwnWorkspace(spec sandbox.Spec, uid, gid int) error {
	ws := spec.Policy.Filesystem.WorkspacePath()
	if !spec.OwnWorkspace || ws == "" {
		return nil
	}
	if err := os.Lchown(ws, uid, gid); err != nil {
		return fmt.Errorf("workspace owner: %v: %w", err, sandbox.ErrUnavailable)
	}
	return nil
}
