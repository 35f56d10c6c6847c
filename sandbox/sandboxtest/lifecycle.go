package sandboxtest

import (
	"context"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func (s *suite) testLifecycle(t *testing.T) {
	ctx := ctxT(t)
	sp := s.spec(t)
	sb, err := s.b.Create(ctx, sp)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			sb.Destroy(context.Background())
		}
	})
	if sb.ID() != sp.ID {
		t.Errorf("ID() = %q, want the spec's %q", sb.ID(), sp.ID)
	}
	select {
	case <-sb.Done():
		t.Fatal("Done is closed right after Create")
	default:
	}
	bx := &box{Sandbox: sb, spec: sp, ws: s.workspace(sp)}
	bx.helper = bx.ws + "/sbt-helper-" + sp.ID
	if s.opts.HelperGOOS == "wasip1" {
		bx.helper += ".wasm"
	}
	if err := s.placeHelper(ctx, bx); err != nil {
		t.Fatalf("place helper: %v", err)
	}
	if r := bx.run(t, nil, "echo-split", "alive", ""); r.stdout != "alive" || r.status.Code != 0 {
		t.Fatalf("exec in a fresh sandbox: %+v", r)
	}
	if _, err := sb.Stats(ctx); err != nil && !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("Stats: %v", err)
	}

	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	destroyed = true
	if !waitClosed(ctx, sb.Done()) {
		t.Fatal("Done not closed after Destroy returned")
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("second Destroy: %v, want nil (idempotent)", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("exit", "0")}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec after Destroy: %v, want ErrClosed", err)
	}
	if _, err := sb.Files().Stat(ctx, bx.ws); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Files().Stat after Destroy: %v, want ErrClosed", err)
	}
	if _, err := sb.Stats(ctx); !errors.Is(err, sandbox.ErrClosed) && !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("Stats after Destroy: %v, want ErrClosed", err)
	}
	if s.opts.LeakCheck != nil {
		if err := s.opts.LeakCheck(t, sp.ID); err != nil {
			t.Errorf("leftovers after Destroy: %v", err)
		}
	}
}

// testInvalidSpec: a spec the backend must refuse leaves nothing behind.
func (s *suite) testInvalidSpec(t *testing.T) {
	ctx := ctxT(t)
	cases := map[string]func(sp *sandbox.Spec){
		"nil policy": func(sp *sandbox.Spec) { sp.Policy = nil },
		"empty id":   func(sp *sandbox.Spec) { sp.ID = "" },
		"relative workspace": func(sp *sandbox.Spec) {
			p := *sp.Policy
			p.Filesystem.Workspace = "relative/dir"
			sp.Policy = &p
		},
	}
	for name, mutate := range cases {
		sp := s.spec(t)
		id := sp.ID
		mutate(&sp)
		sb, err := s.b.Create(ctx, sp)
		if err == nil {
			sb.Destroy(ctx)
			t.Errorf("%s: Create succeeded, want an error wrapping ErrInvalid", name)
			continue
		}
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: Create error %v does not wrap ErrInvalid", name, err)
		}
		if s.opts.LeakCheck != nil && id != "" {
			if err := s.opts.LeakCheck(t, id); err != nil {
				t.Errorf("%s: failed Create left %v", name, err)
			}
		}
	}
}

// testCleanup: Cleanup keeps the sandboxes it is told to keep.
func (s *suite) testCleanup(t *testing.T) {
	bx := s.create(t, s.spec(t))
	ctx := ctxT(t)
	if err := s.b.Cleanup(ctx, map[string]bool{bx.ID(): true}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := s.b.Cleanup(ctx, map[string]bool{bx.ID(): true}); err != nil {
		t.Fatalf("second Cleanup: %v (must be idempotent)", err)
	}
	if r := bx.run(t, nil, "echo-split", "kept", ""); r.stdout != "kept" {
		t.Fatalf("exec after Cleanup: %+v", r)
	}
	select {
	case <-bx.Done():
		t.Fatal("Cleanup ended a sandbox listed in keep")
	default:
	}
}
