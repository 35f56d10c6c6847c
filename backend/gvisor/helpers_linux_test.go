package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	return fmt.Sprintf("gv%d-%d", os.Getpid(), idSeq.Add(1))
}

// testBackend returns a backend with its own state dir (so its Cleanup
// never touches another test process's sandboxes) and cgroup parent.
func testBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "runsc")
	dir, err := os.MkdirTemp("", "gvt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: dir})
}

// testPolicy resolves the default profile with ws as workspace and applies
// edit before resolving.
func testPolicy(t testing.TB, ws string, edit func(p *policy.Policy)) *policy.Policy {
	t.Helper()
	return backendtest.Policy(t, ws, edit)
}

// direct turns protect_config off: the workspace is written in place.
func direct(p *policy.Policy) { backendtest.Direct(p) }

func workspace(t testing.TB) string { t.Helper(); return backendtest.Workspace(t) }

// create makes a sandbox and destroys it when t ends.
func create(t testing.TB, b *Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.ID == "" {
		spec.ID = newID(t)
	}
	return backendtest.Create(t, b, spec, 60*time.Second)
}

// sh runs a shell snippet in sb through the agent and returns its status
// and combined output.
func sh(t testing.TB, sb sandbox.Sandbox, script string) (sandbox.ExitStatus, string) {
	t.Helper()
	return backendtest.Sh(t, sb, script, 60*time.Second)
}

// leaks reports what sandbox id left on the host: a runsc container or
// state, a bundle, cgroups, processes, mounts.
func leaks(b *Backend, id string) error {
	var found []string
	if b.hasState(id) {
		found = append(found, "runsc state")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := b.runsc(ctx, "list", "--quiet"); err == nil {
		for _, l := range strings.Fields(string(out)) {
			if l == id {
				found = append(found, "runsc container")
			}
		}
	}
	if _, err := os.Stat(b.bundleDir(id)); err == nil {
		found = append(found, "bundle "+b.bundleDir(id))
	}
	found = append(found, leftoverCgroups(b.cfg.CgroupParent, id)...)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		c, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if bytes.Contains(c, []byte(b.bundleDir(id))) || bytes.Contains(c, []byte("\x00"+id+"\x00")) || bytes.HasSuffix(c, []byte("\x00"+id)) {
			found = append(found, "process "+p)
		}
	}
	if m, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(m, []byte(b.bundleDir(id))) {
		found = append(found, "mount under "+b.bundleDir(id))
	}
	if len(found) > 0 {
		return fmt.Errorf("%s", strings.Join(found, "; "))
	}
	return nil
}

// eventLog collects audit events.
type eventLog struct {
	mu     sync.Mutex
	events []audit.Event
}

func newEventLog() *eventLog { return &eventLog{} }

func (l *eventLog) Emit(e audit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) count(typ string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
