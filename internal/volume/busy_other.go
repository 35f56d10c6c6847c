//go:build !linux

package volume

import "time"

// WaitFree is Linux-only.
func WaitFree(image string, timeout time.Duration) error { return errNoVolumes }
