//go:build !linux

package imageroot

import (
	"os"

	"github.com/airlock-dev/airlock/sandbox"
)

// Detached needs Linux.
func Detached([]string, *Writable) (*os.File, error) { return nil, sandbox.ErrNotSupported }

// Attach needs Linux.
func Attach(int, string) error { return sandbox.ErrNotSupported }

// Mapped needs Linux.
func Mapped([]string, *os.File) ([]*os.File, error) { return nil, sandbox.ErrNotSupported }
