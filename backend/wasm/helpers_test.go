package wasm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

var (
	guestOnce sync.Once
	guestPath string
	guestErr  error
	guestLog  []byte
)

// guestModule builds testdata/guest for wasip1 once per test binary.
func guestModule(t testing.TB) string {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-wasm-guest-")
		if err != nil {
			guestErr = err
			return
		}
		guestPath = filepath.Join(dir, "guest.wasm")
		cmd := exec.Command("go", "build", "-o", guestPath, "./testdata/guest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		guestLog, guestErr = cmd.CombinedOutput()
	})
	if guestErr != nil {
		t.Fatalf("build guest: %v\n%s", guestErr, guestLog)
	}
	return guestPath
}

var (
	sharedOnce sync.Once
	shared     *Backend
)

// testBackend is one backend for the whole test binary, as a server has:
// modules compile once and every test shares the cache.
func testBackend(t testing.TB) *Backend {
	t.Helper()
	g := guestModule(t)
	sharedOnce.Do(func() {
		// The default on-disk compilation cache, shared with the CLI:
		// ruby compiles once per machine, not once per test run.
		shared = New(Config{
			AssetDir: repoAssetDir(),
			Commands: map[string]string{"guest": g},
		})
	})
	return shared
}

// repoAssetDir is var/wasm at the repository root, where
// scripts/wasm-assets.sh installs the interpreters.
func repoAssetDir() string {
	if d := os.Getenv("AIRLOCK_WASM_DIR"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "var", "wasm")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// testPolicy is a resolved policy with workspace ws and generous limits.
func testPolicy(ws string) *policy.Policy {
	return &policy.Policy{
		Version:    1,
		Filesystem: policy.Filesystem{Workspace: ws},
		Limits: policy.Limits{
			Memory:      256 << 20,
			Timeout:     policy.Duration(60 * time.Second),
			OutputBytes: 1 << 20,
		},
	}
}

var idSeq struct {
	sync.Mutex
	n int
}

func newSandbox(t testing.TB, p *policy.Policy) sandbox.Sandbox {
	t.Helper()
	idSeq.Lock()
	idSeq.n++
	id := fmt.Sprintf("test-%d-%d", os.Getpid(), idSeq.n)
	idSeq.Unlock()
	sb, err := testBackend(t).Create(context.Background(), sandbox.Spec{ID: id, Policy: p})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

type result struct {
	status         sandbox.ExitStatus
	stdout, stderr string
}

// run execs args in sb and waits.
func run(t testing.TB, sb sandbox.Sandbox, req sandbox.ExecRequest) result {
	t.Helper()
	var out, errb bytes.Buffer
	if req.Stdout == nil {
		req.Stdout = &out
	}
	if req.Stderr == nil {
		req.Stderr = &errb
	}
	p, err := sb.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Args, err)
	}
	st, err := p.Wait(context.Background())
	if err != nil {
		t.Fatalf("wait %q: %v", req.Args, err)
	}
	return result{st, out.String(), errb.String()}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestPath != "" {
		os.RemoveAll(filepath.Dir(guestPath))
	}
	os.Exit(code)
}
