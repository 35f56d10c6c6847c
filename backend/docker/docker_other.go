//go:build !linux

package docker

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

var errNotLinux = fmt.Errorf("docker backend needs Linux (the agent runs as a Linux container's init): %w", sandbox.ErrUnavailable)

type engine struct{}

// Info reports that the backend cannot run here.
func (b *Backend) Info(context.Context) Info { return Info{Err: errNotLinux} }

// Probe reports the backend unavailable.
func (b *Backend) Probe(context.Context) sandbox.Probe {
	return sandbox.Probe{Available: false, Reason: errNotLinux.Error(), Isolation: "weak"}
}

// Create fails: see Probe.
func (b *Backend) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

// Cleanup has nothing to do off Linux.
func (b *Backend) Cleanup(context.Context, map[string]bool) error { return nil }
