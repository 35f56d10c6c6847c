//go:build !linux

package idmap

import (
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/errdefs"
)

var (
	errUnavailable = errdefs.ErrUnavailable
	errLimit       = errdefs.ErrLimit
)

func tryLock(path string) (*os.File, error) {
	return nil, fmt.Errorf("host id ranges need Linux: %w", errdefs.ErrNotSupported)
}
