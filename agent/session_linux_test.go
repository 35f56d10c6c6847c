package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// echoEgress answers each tunnelled connection with "echo: " and what it read.
type echoEgress struct {
	n       atomic.Int32
	sandbox atomic.Value
}

func (e *echoEgress) ServeEgress(ctx context.Context, sandboxID string, conn io.ReadWriteCloser) {
	e.n.Add(1)
	e.sandbox.Store(sandboxID)
	b, _ := io.ReadAll(conn)
	fmt.Fprintf(conn, "echo: %s", b)
	conn.Close()
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// dialReq runs the test binary inside the guest as a client of addr.
func dialReq(addr string) sandbox.ExecRequest {
	return sandbox.ExecRequest{
		Args: []string{os.Args[0], "-test.run=^$", addr},
		Env:  map[string]string{modeEnv: "dial"},
	}
}

func TestEgressTunnel(t *testing.T) {
	eg := &echoEgress{}
	cfg := baseConfig()
	cfg.EgressAddr = freePort(t)
	g := startGuest(t, guestOptions{config: &cfg, client: ClientOptions{SandboxID: "sb-egress", Egress: eg}})
	for i := 0; i < 3; i++ {
		r := mustRun(t, g.client, dialReq(cfg.EgressAddr))
		if r.status.Code != 0 || r.stdout != "echo: hello through the tunnel\n" {
			t.Fatalf("got %+v", r)
		}
	}
	if eg.n.Load() != 3 || eg.sandbox.Load() != "sb-egress" {
		t.Fatalf("handler saw %d connections for %v", eg.n.Load(), eg.sandbox.Load())
	}
}

// copyEgress echoes bytes back as they come (both directions at once).
type copyEgress struct{}

func (copyEgress) ServeEgress(ctx context.Context, sandboxID string, conn io.ReadWriteCloser) {
	io.Copy(conn, conn)
	conn.Close()
}

func TestEgressBulkConcurrent(t *testing.T) {
	cfg := baseConfig()
	cfg.EgressAddr = freePort(t)
	g := startGuest(t, guestOptions{config: &cfg, client: ClientOptions{Egress: copyEgress{}}})
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			req := dialReq(cfg.EgressAddr)
			req.Env[modeEnv] = "dial-bulk"
			r := run(t, g.client, req)
			if r.err != nil || r.stdout != "bulk ok" {
				errs <- fmt.Errorf("%+v", r)
				return
			}
			errs <- nil
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestEgressRefusedWithoutHandler(t *testing.T) {
	cfg := baseConfig()
	cfg.EgressAddr = freePort(t)
	g := startGuest(t, guestOptions{config: &cfg})
	r := mustRun(t, g.client, dialReq(cfg.EgressAddr))
	if r.stdout != "" {
		t.Fatalf("refused tunnel answered: %+v", r)
	}
	if err := g.client.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestHello(t *testing.T) {
	g := startGuest(t, guestOptions{noHello: true})
	ctx := testCtx(t)
	// An exec sent before the hello (pipelined behind it) waits for the
	// configuration: it runs with it, never without it, even across
	// refused hellos.
	pipelined := make(chan result, 1)
	go func() {
		pipelined <- run(t, g.client, sandbox.ExecRequest{Args: []string{"sh", "-c", "echo $HELLO"}})
	}()
	bad := []GuestConfig{
		{Env: []string{"NOEQUALS"}, UID: -1, GID: -1},
		{Env: []string{"A=\x00"}, UID: -1, GID: -1},
		{Workdir: "relative", UID: -1, GID: -1},
		{UID: -2, GID: -1},
		{EgressAddr: "localhost:80", UID: -1, GID: -1},
		{Timeout: -1, UID: -1, GID: -1},
		{Workdir: "/no/such/dir", UID: -1, GID: -1},
	}
	for _, cfg := range bad {
		if err := g.client.Hello(ctx, cfg); !errors.Is(err, sandbox.ErrInvalid) && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("hello %+v: %v", cfg, err)
		}
	}
	// An egress address that cannot be listened on fails the hello and
	// leaves nothing configured: a correct hello still works afterwards.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := baseConfig()
	cfg.EgressAddr = busy.Addr().String()
	if err := g.client.Hello(ctx, cfg); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("hello with a busy egress address: %v", err)
	}
	select {
	case r := <-pipelined:
		t.Fatalf("an exec ran before any hello succeeded: %+v", r)
	default:
	}
	good := baseConfig()
	good.Env = append(good.Env, "HELLO=applied")
	if err := g.client.Hello(ctx, good); err != nil {
		t.Fatal(err)
	}
	if r := <-pipelined; r.err != nil || r.stdout != "applied\n" {
		t.Fatalf("the exec pipelined behind the hello: %v %q", r.err, r.stdout)
	}
	// Configuration is fixed once given.
	if err := g.client.Hello(ctx, baseConfig()); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("second hello: %v", err)
	}
}

func TestSessionLoss(t *testing.T) {
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := g.client.Files().ReadFile(ctx, "/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Kill() // the agent dies
	select {
	case <-g.client.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after the agent died")
	}
	if _, err := p.Wait(ctx); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("wait: %v", err)
	}
	if _, err := g.client.Exec(ctx, sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec: %v", err)
	}
	if _, err := io.ReadAll(rc); err != nil && !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("read: %v", err)
	}
	if _, err := g.client.Files().Stat(ctx, "/"); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("stat: %v", err)
	}
	if err := g.client.Ping(ctx); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("ping: %v", err)
	}
	if err := p.Signal(ctx, 9); !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("signal: %v", err)
	}
	if err := g.client.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseKillsProcesses(t *testing.T) {
	// When the host closes the session the agent exits and the processes
	// it started are killed.
	g := startGuest(t, guestOptions{})
	ctx := testCtx(t)
	p, err := g.client.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	g.client.Close()
	g.cmd.Wait()
	waitFor(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}

func TestAuditEvents(t *testing.T) {
	var c audit.Counter
	g := startGuest(t, guestOptions{root: t.TempDir(), client: ClientOptions{Audit: &c, OutputLimit: 10}})
	mustRun(t, g.client, sh("yes"))
	if err := g.client.Files().WriteFile(testCtx(t), "/f", strings.NewReader("x"), 0o644, false); err != nil {
		t.Fatal(err)
	}
	if c.Count(audit.TypeExec) != 1 || c.Count(audit.TypeExit) != 1 || c.Count(audit.TypeLimit) != 1 || c.Count(audit.TypeFile) != 1 {
		t.Fatalf("events: exec %d exit %d limit %d file %d", c.Count(audit.TypeExec), c.Count(audit.TypeExit), c.Count(audit.TypeLimit), c.Count(audit.TypeFile))
	}
}
