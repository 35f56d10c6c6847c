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

// HelperCommand is the hidden airlock subcommand that runs HelperMain.
const HelperCommand = "__image-overlay"

// MappedOverlay needs Linux.
func MappedOverlay(string, []string, *Writable, int, int, int) (*os.File, error) {
	return nil, sandbox.ErrNotSupported
}

// HelperMain needs Linux.
func HelperMain() int { return 1 }
