package wasm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/wasm/wasmtest"
	"github.com/airlock-dev/airlock/sandbox"
)

func TestHelloModule(t *testing.T) {
	b, sb := helloSandbox(t)
	_ = b
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"hello"}})
	if r.stdout != "hi\n" || r.status.Code != 0 {
		t.Fatalf("hello: %+v %q %q", r.status, r.stdout, r.stderr)
	}
}

// helloSandbox is a backend with the tiny hello module registered and a
// sandbox to run it in.
func helloSandbox(tb testing.TB) (*Backend, sandbox.Sandbox) {
	tb.Helper()
	dir := tb.TempDir()
	mod := filepath.Join(dir, "hello.wasm")
	if err := os.WriteFile(mod, wasmtest.HelloModule(), 0o644); err != nil {
		tb.Fatal(err)
	}
	b := New(Config{CacheDir: filepath.Join(dir, "cache"), Commands: map[string]string{"hello": mod}})
	tb.Cleanup(func() { b.Close(context.Background()) })
	sb, err := b.Create(context.Background(), sandbox.Spec{ID: "bench", Policy: testPolicy(filepath.Join(dir))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sb.Destroy(context.Background()) })
	return b, sb
}

// BenchmarkExecCached is one Exec+Wait of a small module whose compiled
// code is cached: instantiate, run _start, collect the exit status. It
// reports the median as p50-ms (target: under 1 ms).
func BenchmarkExecCached(b *testing.B) {
	_, sb := helloSandbox(b)
	ctx := context.Background()
	var out bytes.Buffer
	exec := func() {
		out.Reset()
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"hello"}, Stdout: &out})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	exec() // compile once
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		exec()
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	if out.String() != "hi\n" {
		b.Fatalf("output %q", out.String())
	}
	reportQuantiles(b, durations)
}

// BenchmarkSandboxLifecycle is Create, one Exec of the cached module and
// Destroy: what `airlock run --backend wasm` does in-process.
func BenchmarkSandboxLifecycle(b *testing.B) {
	bk, _ := helloSandbox(b)
	ctx := context.Background()
	pol := testPolicy(b.TempDir())
	durations := make([]time.Duration, 0, b.N)
	n := 0
	for b.Loop() {
		start := time.Now()
		n++
		sb, err := bk.Create(ctx, sandbox.Spec{ID: "life-" + time.Now().Format("150405.000000000"), Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"hello"}})
		if err != nil {
			b.Fatal(err)
		}
		p.Wait(ctx)
		sb.Destroy(ctx)
		durations = append(durations, time.Since(start))
	}
	reportQuantiles(b, durations)
}

func reportQuantiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	ms := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// BenchmarkRubyOneLiner is `ruby -e 'puts 1+1'` in a sandbox, the ruby
// module compiled and cached: instantiate, ruby-init, eval, exit.
func BenchmarkRubyOneLiner(b *testing.B) {
	if _, err := os.Stat(filepath.Join(repoAssetDir(), "ruby.wasm")); err != nil {
		b.Skip("ruby.wasm not installed: run `make wasm-assets`")
	}
	sb := newSandbox(b, testPolicy(b.TempDir()))
	ctx := context.Background()
	exec := func() {
		var out bytes.Buffer
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"ruby", "-e", "puts 1+1"}, Stdout: &out})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 || out.String() != "2\n" {
			b.Fatalf("%+v %v %q", st, err, out.String())
		}
	}
	exec()
	durations := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		exec()
		durations = append(durations, time.Since(start))
	}
	reportQuantiles(b, durations)
}
