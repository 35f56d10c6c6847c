//go:build !linux

package main

import (
	"flag"
	"fmt"
	"runtime"

	"github.com/airlock-dev/airlock/errdefs"
)

// runSession: sessions keep a native sandbox warm, which needs Linux.
func runSession(fs *flag.FlagSet, f *runFlags, argv, args []string) int {
	return fail("run", fmt.Errorf("--session needs Linux and this is %s: %w", runtime.GOOS, errdefs.ErrUnavailable))
}
