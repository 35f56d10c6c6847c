//go:build !linux

package hostfs

import (
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

// errNotLinux: placeholders are resolved with openat2, which only Linux has.
var errNotLinux = fmt.Errorf("workspace placeholders need Linux: %w", sandbox.ErrUnavailable)

// CreatePlaceholders refuses: see errNotLinux.
func CreatePlaceholders(ws string, pending []string) ([]Placeholder, error) {
	if len(pending) == 0 {
		return nil, nil
	}
	return nil, errNotLinux
}

// RemovePlaceholders has nothing to remove where none can be created.
func RemovePlaceholders(ph []Placeholder) error { return nil }
