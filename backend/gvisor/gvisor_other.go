//go:build !linux

package gvisor

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

var errNotLinux = fmt.Errorf("gvisor backend needs Linux: %w", sandbox.ErrUnavailable)

// Info reports that runsc cannot run here.
func (b *Backend) Info(context.Context) Info { return Info{Err: errNotLinux} }

// RunscInfo reports that runsc cannot run here.
func RunscInfo(context.Context, string, string) Info { return Info{Err: errNotLinux} }

// Probe reports the backend unavailable.
func (b *Backend) Probe(context.Context) sandbox.Probe {
	return sandbox.Probe{Available: false, Reason: errNotLinux.Error(), Isolation: "medium"}
}

// Create fails: see Probe.
func (b *Backend) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

// Cleanup has nothing to do off Linux.
func (b *Backend) Cleanup(context.Context, map[string]bool) error { return nil }
