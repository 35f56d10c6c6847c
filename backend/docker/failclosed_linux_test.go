package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestCreateFailsClosed: a spec the backend cannot honour is refused with
// the right kind and a message naming what is wrong, and leaves nothing
// behind (no container, volume, state dir).
func TestCreateFailsClosed(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	inner := filepath.Join(ws, "sub")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		spec sandbox.Spec
		kind error
		msg  string
	}{
		{"missing image", sandbox.Spec{Image: "airlock-test/no-such-image:1", Policy: testPolicy(t, ws, direct)}, sandbox.ErrNotFound, "not in the docker daemon"},
		{"bad image reference", sandbox.Spec{Image: "bad\nref", Policy: testPolicy(t, ws, direct)}, sandbox.ErrInvalid, "image"},
		{"missing workspace", sandbox.Spec{Policy: testPolicy(t, ws, func(p *policy.Policy) { direct(p); p.Filesystem.ReadWrite = []string{filepath.Join(ws, "gone")} })}, sandbox.ErrInvalid, "gone"},
		// A tmpfs below the workspace whose mount point does not exist:
		// the runtime would create it in the host directory.
		{"mount point in a host dir", sandbox.Spec{Policy: testPolicy(t, ws, func(p *policy.Policy) {
			direct(p)
			p.Filesystem.Tmpfs = append(p.Filesystem.Tmpfs, filepath.Join(inner, "new-dir"))
		})}, sandbox.ErrInvalid, "would create it on the host"},
		{"a rootfs directory", sandbox.Spec{Policy: testPolicy(t, ws, func(p *policy.Policy) { direct(p); p.Filesystem.Rootfs = "/" })}, sandbox.ErrInvalid, "images"},
		{"bad id", sandbox.Spec{ID: "../x", Policy: testPolicy(t, ws, direct)}, sandbox.ErrInvalid, "invalid id"},
		{"no policy", sandbox.Spec{}, sandbox.ErrInvalid, "nil policy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := c.spec
			if sp.ID == "" {
				sp.ID = newID(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sb, err := b.Create(ctx, sp)
			if err == nil {
				sb.Destroy(ctx)
				t.Fatal("created")
			}
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want kind %v mentioning %q", err, c.kind, c.msg)
			}
			if sandbox.ValidID(sp.ID) {
				if err := leaks(b, sp.ID); err != nil {
					t.Fatalf("left behind: %v", err)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(inner, "new-dir")); err == nil {
		t.Fatal("a refused create made a mount point in the host directory")
	}
}

// TestWallTimeoutEndsSandbox: the policy's timeout removes the container;
// a process running then reports TimedOut.
func TestWallTimeoutEndsSandbox(t *testing.T) {
	b := testBackend(t)
	id := newID(t)
	sb := create(t, b, sandbox.Spec{ID: id, Policy: testPolicy(t, workspace(t), func(p *policy.Policy) {
		direct(p)
		p.Limits.Timeout = policy.Duration(2 * time.Second)
	})})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || !st.TimedOut {
		t.Fatalf("status %+v, %v: want TimedOut", st, err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		t.Fatal("sandbox not done after its timeout")
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) || !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("exec after the timeout: %v", err)
	}
	if err := leaks(b, id); err != nil {
		t.Fatalf("left behind: %v", err)
	}
}
