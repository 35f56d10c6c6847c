//go:build !linux

package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/errdefs"
)

var errNoVolumes = fmt.Errorf("disk quota volumes need Linux: %w", errdefs.ErrNotSupported)

// Available says why volumes cannot be made on this host.
func Available() string { return errNoVolumes.Error() }

// Create is Linux-only.
func Create(ctx context.Context, image, dir string, size int64, uid, gid int) (*Volume, error) {
	return nil, errNoVolumes
}

// Attach is Linux-only.
func Attach(image, dir string) (*Volume, error) { return nil, errNoVolumes }

// Close is Linux-only.
func (v *Volume) Close() error { return errNoVolumes }

// Remove is Linux-only.
func (v *Volume) Remove() error { return errNoVolumes }

// Sweep is Linux-only.
func Sweep(root string) error { return nil }

// Detach is Linux-only.
func (v *Volume) Detach(wait time.Duration) error { return errNoVolumes }
