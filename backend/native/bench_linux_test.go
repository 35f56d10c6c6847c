package native

import (
	"context"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// BenchmarkCreateExecDestroy is `airlock run -- /bin/true` minus the CLI:
// create a default-policy sandbox, run /bin/true in it, destroy it.
func BenchmarkCreateExecDestroy(b *testing.B) {
	be := testBackend(b)
	ws := workspace(b)
	pol := testPolicy(b, ws, nil)
	ctx := context.Background()
	for b.Loop() {
		sb, err := be.Create(ctx, sandbox.Spec{ID: newID(b), Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("wait: %v %+v", err, st)
		}
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExec is the cost of one exec in a running sandbox.
func BenchmarkExec(b *testing.B) {
	be := testBackend(b)
	ws := workspace(b)
	ctx := context.Background()
	sb, err := be.Create(ctx, sandbox.Spec{ID: newID(b), Policy: testPolicy(b, ws, nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	for b.Loop() {
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		p.Wait(ctx)
	}
}
