package gvisor

import (
	"context"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

// BenchmarkCreateExecDestroy is one whole sandbox per iteration: what
// `airlock run --backend gvisor -- /bin/true` costs minus the process
// start (bench/gvisor.sh compares that with `runsc do`).
func BenchmarkCreateExecDestroy(b *testing.B) {
	bk := testBackend(b)
	pol := testPolicy(b, workspace(b), nil)
	ctx := context.Background()
	for b.Loop() {
		sb, err := bk.Create(ctx, sandbox.Spec{ID: newID(b), Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("status %+v err %v", st, err)
		}
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExec is one /bin/true in a running sandbox: the warm path (a
// pooled sandbox in the server).
func BenchmarkExec(b *testing.B) {
	bk := testBackend(b)
	sb := create(b, bk, sandbox.Spec{Policy: testPolicy(b, workspace(b), nil)})
	ctx := context.Background()
	for b.Loop() {
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("status %+v err %v", st, err)
		}
	}
}

// BenchmarkStat is one Files().Stat: a round trip to the agent with no
// process started.
func BenchmarkStat(b *testing.B) {
	bk := testBackend(b)
	ws := workspace(b)
	sb := create(b, bk, sandbox.Spec{Policy: testPolicy(b, ws, nil)})
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.Files().Stat(ctx, ws); err != nil {
			b.Fatal(err)
		}
	}
}
