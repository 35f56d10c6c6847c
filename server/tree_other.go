//go:build !linux

package server

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/airlock-dev/airlock/sandbox"
)

func fileOwner(fs.FileInfo, owner) (int, int) { return 0, 0 }

func restoreTree(context.Context, *manifest, *objectStore, string, owner) error {
	return fmt.Errorf("restore a checkpoint: Linux only: %w", sandbox.ErrNotSupported)
}

func shiftOwner(string, owner, owner, int) error {
	return fmt.Errorf("shift file owners: Linux only: %w", sandbox.ErrNotSupported)
}

// oNoFollow: os.Root already refuses symlinks that leave the root.
const oNoFollow = 0
