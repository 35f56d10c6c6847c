//go:build !linux

package volume

import (
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

// ErrHeld: see the Linux version.
var ErrHeld = fmt.Errorf("volume still held: %w", errdefs.ErrUnavailable)

// WaitFree is Linux-only.
func WaitFree(image string, timeout time.Duration) error { return errNoVolumes }
