package main

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/sandbox"
)

func imageBuild(ctx context.Context, args []string) error {
	return fmt.Errorf("image build: not yet: %w", sandbox.ErrNotSupported)
}
