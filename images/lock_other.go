//go:build !linux

package images

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/errdefs"
)

type fileLock struct{}

var errPlatform = fmt.Errorf("the image store needs Linux (overlayfs layers): %w", errdefs.ErrNotSupported)

func lockFile(context.Context, string, bool) (*fileLock, error) { return nil, errPlatform }
func tryLock(string) (*fileLock, error)                         { return nil, errPlatform }
func (l *fileLock) unlock()                                     {}
func checkPlatform() error                                      { return errPlatform }
