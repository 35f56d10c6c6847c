package backend

import (
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

func openNative(Options) (sandbox.Backend, error) {
	return nil, fmt.Errorf("backend native: %w", sandbox.ErrUnavailable)
}

func openGvisor(Options) (sandbox.Backend, error) {
	return nil, fmt.Errorf("backend gvisor: %w", sandbox.ErrUnavailable)
}
