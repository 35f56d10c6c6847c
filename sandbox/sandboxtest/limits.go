package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func (s *suite) testMemoryLimit(t *testing.T) {
	sp := s.spec(t)
	sp.Policy.Limits.Memory = 64 << 20
	bx := s.create(t, sp)
	r := bx.run(t, nil, "alloc", "512")
	if r.status.Code == 0 && strings.Contains(r.stdout, "allocated 512") {
		t.Fatalf("allocated 512 MiB under a 64 MiB limit: %+v", r)
	}
	if r.status.Code == 0 {
		t.Fatalf("alloc over the limit exited 0: %+v", r)
	}
	t.Logf("over the memory limit: status %+v", r.status)
	// The sandbox survives its process being stopped.
	if r := bx.run(t, nil, "echo-split", "after-oom", ""); r.stdout != "after-oom" {
		t.Fatalf("sandbox unusable after the memory limit hit: %+v", r)
	}
}

func (s *suite) testPidsLimit(t *testing.T) {
	sp := s.spec(t)
	sp.Policy.Limits.Pids = 24
	bx := s.create(t, sp)
	r := bx.run(t, nil, "spawn", "100")
	if r.status.Code == 0 || strings.Contains(r.stdout, "spawned 100 of 100") {
		t.Fatalf("spawned 100 processes under a limit of 24: %+v", r)
	}
	t.Logf("over the pids limit: %q status %+v", strings.TrimSpace(r.stdout), r.status)
	if r := bx.run(t, nil, "echo-split", "after-pids", ""); r.stdout != "after-pids" {
		t.Fatalf("sandbox unusable after the pids limit hit: %+v", r)
	}
}

func (s *suite) testOutputLimit(t *testing.T) {
	sp := s.spec(t)
	const limit = 1 << 20
	sp.Policy.Limits.OutputBytes = policy.ByteSize(limit)
	bx := s.create(t, sp)
	c := &patternChecker{badAt: -1}
	var errb bytes.Buffer
	st := bx.exec(t, sandbox.ExecRequest{Args: bx.argv("pattern", "16"), Stdout: c, Stderr: &errb})
	if c.n+int64(errb.Len()) > limit {
		t.Fatalf("received %d bytes under an output limit of %d", c.n+int64(errb.Len()), limit)
	}
	if !st.Truncated {
		t.Fatalf("status %+v after %d bytes, want Truncated", st, c.n)
	}
	if c.badAt >= 0 {
		t.Fatalf("output corrupted at byte %d", c.badAt)
	}
}

// testNoLeaks destroys a sandbox with processes still running (one of them
// detached in its own session) and asks the backend's leak check.
func (s *suite) testNoLeaks(t *testing.T) {
	if s.opts.LeakCheck == nil {
		t.Fatal("sandboxtest: Options.LeakCheck is required (or declare destroy/no-leaks not applicable)")
	}
	sp := s.spec(t)
	bx := s.create(t, sp)
	ctx := ctxT(t)
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("sleep", "600")})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.HelperGOOS != "wasip1" {
		if r := bx.run(t, nil, "spawn-bg", "600"); r.status.Code != 0 {
			t.Fatalf("spawn-bg: %+v", r)
		}
	}
	if err := bx.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := p.Wait(ctx); ctx.Err() != nil {
		t.Fatalf("Wait of a process still running at Destroy did not return: %v", err)
	}
	if err := s.opts.LeakCheck(t, sp.ID); err != nil {
		t.Fatalf("leftovers after Destroy: %v", err)
	}
}

func (s *suite) testConcurrentExecs(t *testing.T) {
	bx := s.create(t, s.spec(t))
	n := s.opts.Parallel
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			var out, errb bytes.Buffer
			want := fmt.Sprintf("exec-%d-%s", i, randHex(4))
			p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("echo-split", want, "e"+want), Stdout: &out, Stderr: &errb})
			if err != nil {
				errs <- err
				return
			}
			st, err := p.Wait(ctx)
			if err != nil || st.Code != 0 || out.String() != want || errb.String() != "e"+want {
				errs <- fmt.Errorf("exec %d: status %+v err %v stdout %q stderr %q", i, st, err, out.String(), errb.String())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (s *suite) testConcurrentSandboxes(t *testing.T) {
	n := s.opts.Parallel / 2
	if n < 2 {
		n = 2
	}
	specs := make([]sandbox.Spec, n)
	for i := range specs {
		specs[i] = s.spec(t)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make([]string, n)
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			sb, err := s.b.Create(ctx, specs[i])
			if err != nil {
				errs <- fmt.Errorf("create %d: %w", i, err)
				return
			}
			defer sb.Destroy(context.Background())
			ids[i] = sb.ID()
			bx := &box{Sandbox: sb, spec: specs[i], ws: s.workspace(specs[i])}
			bx.helper = bx.ws + "/sbt-helper-" + specs[i].ID
			if s.opts.HelperGOOS == "wasip1" {
				bx.helper += ".wasm"
			}
			if err := s.placeHelper(ctx, bx); err != nil {
				errs <- err
				return
			}
			var out bytes.Buffer
			p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: bx.argv("echo-split", sb.ID(), ""), Stdout: &out})
			if err != nil {
				errs <- fmt.Errorf("exec in %d: %w", i, err)
				return
			}
			if st, err := p.Wait(ctx); err != nil || st.Code != 0 || out.String() != sb.ID() {
				errs <- fmt.Errorf("sandbox %d: status %+v err %v out %q", i, st, err, out.String())
			}
			if err := sb.Destroy(ctx); err != nil {
				errs <- fmt.Errorf("destroy %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if errors.Is(err, sandbox.ErrLimit) {
			t.Errorf("%v (the backend refused %d concurrent sandboxes)", err, n)
			continue
		}
		t.Error(err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" && seen[id] {
			t.Errorf("two sandboxes share ID %q", id)
		}
		seen[id] = true
	}
	if s.opts.LeakCheck != nil {
		for _, sp := range specs {
			if err := s.opts.LeakCheck(t, sp.ID); err != nil {
				t.Errorf("leftovers of %s: %v", sp.ID, err)
			}
		}
	}
}

// testDialPort reaches a server on the sandbox's own loopback from the
// host through the agent (sandbox.PortDialer: port routes and the
// browser use it): nothing listening is ErrUnavailable, a bad port
// ErrInvalid, a listening one answers.
func (s *suite) testDialPort(t *testing.T) {
	bx := s.shared(t)
	d, ok := bx.Sandbox.(sandbox.PortDialer)
	if !ok {
		t.Fatal("the sandbox is not a sandbox.PortDialer")
	}
	ctx := ctxT(t)
	if _, err := d.DialPort(ctx, 18431); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("dial with nothing listening: %v, want ErrUnavailable", err)
	}
	if _, err := d.DialPort(ctx, 70000); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("dial port 70000: %v, want ErrInvalid", err)
	}
	p, err := bx.Exec(ctx, sandbox.ExecRequest{Args: []string{bx.helper, "serve", "18431"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	var line string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		c, err := d.DialPort(ctx, 18431)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(c, 100))
		c.Close()
		if line = string(b); line != "" {
			break
		}
	}
	if line != "hello from 18431\n" {
		t.Errorf("through DialPort: %q", line)
	}
}
