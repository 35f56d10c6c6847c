package native

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

var idSeq atomic.Int64

func newID(t testing.TB) string {
	return fmt.Sprintf("t%d-%d", os.Getpid(), idSeq.Add(1))
}

func testBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	return New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir()})
}

// testPolicy resolves the default profile with ws as workspace, home as
// $HOME, and applies edit before resolving.
func testPolicy(t testing.TB, ws string, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	p, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Filesystem.Workspace = ws
	p.Limits.Timeout = 0
	if edit != nil {
		edit(p)
	}
	r, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventLog collects audit events.
type eventLog struct {
	mu     chan struct{}
	events []audit.Event
}

func newEventLog() *eventLog { return &eventLog{mu: make(chan struct{}, 1)} }

func (e *eventLog) Emit(ev audit.Event) {
	e.mu <- struct{}{}
	e.events = append(e.events, ev)
	<-e.mu
}

func (e *eventLog) count(typ string) int {
	e.mu <- struct{}{}
	defer func() { <-e.mu }()
	n := 0
	for _, ev := range e.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// runDirect runs argv as the init's direct child in a fresh sandbox and
// returns its exit code and combined output.
func runDirect(t testing.TB, b *Backend, pol *policy.Policy, argv ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := b.create(ctx, sandbox.Spec{ID: newID(t), Policy: pol}, &directIO{Args: argv, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("sandbox did not end")
	}
	return s.cmd.ProcessState.ExitCode(), out.String()
}

// sh runs a shell snippet in sb through the agent.
func sh(t testing.TB, sb sandbox.Sandbox, script string) (sandbox.ExitStatus, string) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %q: %v", script, err)
	}
	return st, strings.TrimSpace(out.String())
}

func workspace(t testing.TB) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}
