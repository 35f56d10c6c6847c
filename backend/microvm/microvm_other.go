//go:build !linux

package microvm

import (
	"context"
	"fmt"
	"runtime"

	"github.com/airlock-dev/airlock/sandbox"
)

func unsupported() error {
	return fmt.Errorf("microvm backend: needs Linux (this is %s): %w", runtime.GOOS, sandbox.ErrUnavailable)
}

// Probe reports the backend unavailable off Linux.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	return sandbox.Probe{Isolation: "hardware", Reason: unsupported().Error()}
}

// Create fails off Linux.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, unsupported()
}

// Cleanup has nothing to do off Linux.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error { return nil }

// Info reports the backend unavailable off Linux.
func (b *Backend) Info(ctx context.Context) Info { return Info{Err: unsupported()} }

type kernelFiles struct{}

// JailCommand is the hidden VMM jail command (Linux only).
const JailCommand = "__vmmjail"

// JailMain fails off Linux.
func JailMain(args []string) int { return 2 }
