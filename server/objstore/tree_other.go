//go:build !linux

package objstore

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/airlock-dev/airlock/sandbox"
)

func fileOwner(fs.FileInfo, Owner) (int, int) { return 0, 0 }

// RestoreTree needs Linux (owners and sparse copies).
func RestoreTree(context.Context, *Manifest, *Store, string, Owner) error {
	return fmt.Errorf("restore a checkpoint: Linux only: %w", sandbox.ErrNotSupported)
}

// ShiftOwner needs Linux.
func ShiftOwner(string, Owner, Owner, int) error {
	return fmt.Errorf("shift file owners: Linux only: %w", sandbox.ErrNotSupported)
}

// oNoFollow: os.Root already refuses symlinks that leave the root.
const oNoFollow = 0
