package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Freeze freezes the sandbox's cgroup2 directory (cgroup.freeze: the core
// freezer of cgroup v2, which a hybrid v1 host's unified hierarchy has
// too) and waits until cgroup.events says frozen. See sandbox.Freezer.
func (s *nativeSandbox) Freeze(ctx context.Context) error { return s.freeze(ctx, true) }

// Thaw undoes Freeze. See sandbox.Freezer.
func (s *nativeSandbox) Thaw(ctx context.Context) error { return s.freeze(ctx, false) }

func (s *nativeSandbox) freeze(ctx context.Context, on bool) error {
	op, val := "freeze", "1"
	if !on {
		op, val = "thaw", "0"
	}
	if s.cg == nil || s.cg.v2Dir == "" {
		// The v1 freezer would need a hierarchy of its own per sandbox
		// that every process joins at clone time; only cgroup2's is used.
		return fmt.Errorf("%s sandbox %q: no cgroup2 directory (a cgroup v1-only host): %w", op, s.id, sandbox.ErrNotSupported)
	}
	if s.closed.Load() {
		return fmt.Errorf("%s sandbox %q: %w", op, s.id, sandbox.ErrClosed)
	}
	if err := os.WriteFile(filepath.Join(s.cg.v2Dir, "cgroup.freeze"), []byte(val), 0); err != nil {
		return fmt.Errorf("%s sandbox %q: %v: %w", op, s.id, err, sandbox.ErrUnavailable)
	}
	want := "frozen " + val
	for {
		b, err := os.ReadFile(filepath.Join(s.cg.v2Dir, "cgroup.events"))
		if err != nil {
			return fmt.Errorf("%s sandbox %q: %v: %w", op, s.id, err, sandbox.ErrUnavailable)
		}
		if strings.Contains(string(b), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s sandbox %q: %w", op, s.id, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
