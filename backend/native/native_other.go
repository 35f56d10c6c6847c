//go:build !linux

package native

import (
	"context"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/sandbox"
)

var errNotLinux = fmt.Errorf("native backend needs Linux: %w", sandbox.ErrUnavailable)

// Features is what this host offers the native backend (nothing here).
type Features struct {
	Reason string `json:"reason"`
}

// HostFeatures reports that this OS has no native backend.
func HostFeatures() Features { return Features{Reason: errNotLinux.Error()} }

// ServeFunc serves the agent protocol inside a ready sandbox.
type ServeFunc func(ctx context.Context, conn io.ReadWriteCloser) error

// InitMain fails: there is no native init off Linux.
func InitMain(ServeFunc) int { return 1 }

// Probe reports the backend unavailable.
func (b *Backend) Probe(context.Context) sandbox.Probe {
	return sandbox.Probe{Available: false, Reason: errNotLinux.Error(), Isolation: "kernel"}
}

// Create fails: see Probe.
func (b *Backend) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errNotLinux
}

// Cleanup has nothing to do off Linux.
func (b *Backend) Cleanup(context.Context, map[string]bool) error { return nil }
