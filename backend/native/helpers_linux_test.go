package native

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/backendtest"
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
	// A cgroup parent of its own: Cleanup sweeps every cgroup under its
	// parent that its state directory does not know, so under the default
	// parent it killed the sandboxes of whatever package go test ran
	// beside this one (server, gvisor's CPython comparison, airlock run).
	b := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(),
		CgroupParent: fmt.Sprintf("airlock-nt-%d-%d", os.Getpid(), idSeq.Add(1))})
	t.Cleanup(func() {
		for _, p := range b.cgroupParents() {
			os.Remove(p) // empty once its sandboxes are gone
		}
	})
	return b
}

// testPolicy resolves the default profile with ws as workspace and applies
// edit before resolving.
func testPolicy(t testing.TB, ws string, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	return backendtest.Policy(t, ws, edit)
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

// sh runs a shell snippet in sb through the agent and returns its status
// and combined output.
func sh(t testing.TB, sb sandbox.Sandbox, script string) (sandbox.ExitStatus, string) {
	t.Helper()
	return backendtest.Sh(t, sb, script, 60*time.Second)
}

func workspace(t testing.TB) string { t.Helper(); return backendtest.Workspace(t) }
