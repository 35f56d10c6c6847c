//go:build !linux

package cgroupfs

import (
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

// ErrNotLinux: cgroups exist only on Linux.
var ErrNotLinux = fmt.Errorf("cgroups need Linux: %w", sandbox.ErrUnavailable)

// Remove refuses: see ErrNotLinux.
func Remove(d string, busy func(dir string)) error { return ErrNotLinux }
