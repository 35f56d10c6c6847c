// Package e2b_test runs Airlock's own E2B tests (tests/*.test.mjs) with
// E2B's published SDKs from npm (package.json here, installed by
// scripts/deps.sh with npm ci) against a real `airlock serve
// --e2b-listen`: no mocks, every call crosses the E2B listener, /v1 and a
// native sandbox.
package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// server is one `airlock serve --e2b-listen` for the tests.
type server struct {
	bin, dir, data, socket, addr string
	cmd                          *exec.Cmd
	log                          *bytes.Buffer
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts the server with a "base" image in its store (the
// Debian test image with python3) and returns it with an E2B-form key.
func startServer(t *testing.T, extra ...string) (*server, string) {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	s := &server{bin: testutil.AirlockBinary(t), dir: t.TempDir(), log: &bytes.Buffer{}}
	s.data, s.socket, s.addr = filepath.Join(s.dir, "data"), filepath.Join(s.dir, "airlock.sock"), freePort(t)
	img, err := mutate.Config(imagestest.DebianPython(t), v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(s.dir, "base.tar")
	if err := tarball.WriteToFile(tar, name.MustParseReference("base:latest"), img); err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(s.bin, "image", "import", tar)
	imp.Env = append(os.Environ(), "AIRLOCK_IMAGE_STORE="+filepath.Join(s.data, "images"))
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("image import: %v\n%s", err, out)
	}
	args := append([]string{"serve", "--socket", s.socket, "--data", s.data, "--e2b-listen", s.addr, "--log-level", "debug"}, extra...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", tail(s.log.String(), 20000))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not listen on %s:\n%s", s.addr, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := exec.Command(s.bin, "serve", "key", "create", "--tenant", "e2b", "--data", s.data, "--json").Output()
	if err != nil {
		t.Fatalf("key create: %v", err)
	}
	var k struct {
		Key    string `json:"key"`
		E2BKey string `json:"e2b_key"`
	}
	if err := json.Unmarshal(out, &k); err != nil || !strings.HasPrefix(k.E2BKey, "e2b_") {
		t.Fatalf("key create: %q: %v", out, err)
	}
	return s, k.E2BKey
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// nodeTests runs node's test runner on files in tests/ with env.
func nodeTests(t *testing.T, env []string, files ...string) {
	t.Helper()
	node := testutil.RequireBinary(t, "node")
	if _, err := os.Stat("node_modules/e2b/package.json"); err != nil {
		testutil.Skip(t, "E2B's SDKs are not installed in test/e2b (scripts/deps.sh runs npm ci there)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := append([]string{"--test", "--test-concurrency=2", "--test-reporter=spec"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("node tests: %v", err)
	}
}

func TestE2BSDK(t *testing.T) {
	s, key := startServer(t, "--e2b-domain", "e2b.airlock.test")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/sandbox.test.mjs")
}

// TestE2BFork: fork, snapshots and create-from-snapshot through E2B's
// SDK (tests/fork.test.mjs).
func TestE2BFork(t *testing.T) {
	s, key := startServer(t, "--e2b-domain", "e2b.airlock.test")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/fork.test.mjs")
}
