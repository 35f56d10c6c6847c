//go:build !linux

package agent

import (
	"context"
	"fmt"
	"io"

	"github.com/airlock-dev/airlock/sandbox"
)

// ErrServeUnsupported is returned by Serve and StdioConn off Linux: the
// guest side needs Linux process and filesystem primitives.
var ErrServeUnsupported = fmt.Errorf("agent: the in-sandbox agent needs Linux: %w", sandbox.ErrUnavailable)

// Serve is only available on Linux.
func Serve(ctx context.Context, conn io.ReadWriteCloser, opts ServeOptions) error {
	return ErrServeUnsupported
}

// StdioConn is only available on Linux.
func StdioConn() (io.ReadWriteCloser, error) { return nil, ErrServeUnsupported }
