// Package volume gives a sandbox a disk quota: a filesystem image of a
// fixed size (ext4 in a sparse file), attached to a loop device and
// mounted nosuid,nodev where the sandbox's files live. Whatever the
// sandbox writes (its workspace, and an image sandbox's writable layer in
// the same filesystem) cannot grow past the image, and the image is a
// plain file that outlives a restart (Attach mounts it again).
//
// It must never change the options of an existing mount or touch a mount
// it did not make: it mounts only new loop devices on directories it is
// given, and Sweep unmounts only mounts below its own root.
package volume

import (
	"fmt"

	"github.com/airlock-dev/airlock/errdefs"
)

// Volume is one mounted image.
type Volume struct {
	Image string // the image file
	Dir   string // where it is mounted
	Size  int64  // bytes
}

// MinSize is the smallest image (ext4 needs room for its own metadata).
const MinSize = 8 << 20

func checkSize(size int64) error {
	if size < MinSize {
		return fmt.Errorf("volume size %d: want at least %d bytes: %w", size, MinSize, errdefs.ErrInvalid)
	}
	return nil
}
