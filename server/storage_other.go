//go:build !linux

package server

import (
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

func freeBytes(dir string) (uint64, error) {
	return 0, fmt.Errorf("free space: %w", sandbox.ErrNotSupported)
}

func allocated(path string) int64 { return 0 }
