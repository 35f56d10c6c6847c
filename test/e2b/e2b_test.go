// Package e2b_test runs Airlock's own E2B tests (tests/*.test.mjs) with
// E2B's published SDKs from npm (package.json here, installed by
// scripts/deps.sh with npm ci) against a real `airlock serve
// --e2b-listen`: no mocks, every call crosses the E2B listener, /v1 and a
// native sandbox.
package e2b_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/e2b"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// server is one `airlock serve --e2b-listen` for the tests.
type server struct {
	bin, dir, data, socket, addr string
	cmd                          *exec.Cmd
	log                          *logBuffer
}

// logBuffer is the server's output, read while the server writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
// Debian test image with python3) and "userbase" (base with E2B's user
// "user", home /home/user, named by the image label e2b.UserLabel, as
// E2B's templates are) and returns it with an E2B-form key.
func startServer(t *testing.T, extra ...string) (*server, string) {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	s := &server{bin: testutil.AirlockBinary(t), dir: t.TempDir(), log: &logBuffer{}}
	s.data, s.socket, s.addr = filepath.Join(s.dir, "data"), filepath.Join(s.dir, "airlock.sock"), freePort(t)
	img, err := mutate.Config(imagestest.DebianPython(t), v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(s.dir, "base.tar")
	refs := map[name.Reference]v1.Image{name.MustParseReference("base:latest"): img, name.MustParseReference("userbase:latest"): withE2BUser(t, img)}
	if err := tarball.MultiRefWriteToFile(tar, refs); err != nil {
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

// TestE2BSuiteShapes: what E2B's own suite expects of file owners,
// watches of files.write and a command killed with its sandbox
// (tests/suite.test.mjs).
func TestE2BSuiteShapes(t *testing.T) {
	s, key := startServer(t, "--e2b-domain", "e2b.airlock.test")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/suite.test.mjs")
}

// TestE2BFork: fork, snapshots and create-from-snapshot through E2B's
// SDK (tests/fork.test.mjs).
func TestE2BFork(t *testing.T) {
	s, key := startServer(t, "--e2b-domain", "e2b.airlock.test")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/fork.test.mjs")
}

// TestE2BFileMetadata: file metadata (X-Metadata-* uploads, extended
// attributes user.e2b.KEY) through E2B's SDK, its bounds, and that no
// header reaches another attribute namespace (tests/metadata.test.mjs).
// Unconfined, root on this host sets a trusted.* attribute (so one that
// reached the kernel under its own name would be set); through the door
// such names only ever become keys under user.e2b.
func TestE2BFileMetadata(t *testing.T) {
	testutil.RequireRoot(t)
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	set := exec.Command("python3", "-c", "import os,sys; os.setxattr(sys.argv[1], 'trusted.airlock-probe', b'x'); print(os.listxattr(sys.argv[1]))", probe)
	if out, err := set.CombinedOutput(); err != nil || !strings.Contains(string(out), "trusted.airlock-probe") {
		t.Fatalf("unconfined trusted.* attribute: %v %s (the attack would show nothing)", err, out)
	}
	s, key := startServer(t, "--e2b-domain", "e2b.airlock.test")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/metadata.test.mjs")
}

// withE2BUser is img with the user "user" (uid 1000, home /home/user) and
// the label that makes it envd's default user, the sandbox running as root.
func withE2BUser(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	var passwd, group []byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "etc/passwd":
			passwd, _ = io.ReadAll(tr)
		case "etc/group":
			group, _ = io.ReadAll(tr)
		}
	}
	if passwd == nil || group == nil {
		t.Fatal("base image has no /etc/passwd or /etc/group")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"etc/passwd", append(passwd, "user:x:1000:1000::/home/user:/bin/bash\n"...)},
		{"etc/group", append(group, "user:x:1000:\n"...)},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "home/user/", Mode: 0o755, Uid: 1000, Gid: 1000, Typeflag: tar.TypeDir}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	out, err := mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := out.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{e2b.UserLabel: "user"}
	out, err = mutate.Config(out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestE2BEscape: the escape subset through the E2B door. A keyed tenant
// with its own ceiling (no guarded network range) runs attacks through
// E2B's commands.run (as root in the sandbox): read a host file, write a
// host file, reach a host listener (its address and loopback) and the
// metadata address, signal a host process. Each is first shown to work
// unconfined, from the host.
func TestE2BEscape(t *testing.T) {
	dir := t.TempDir()
	ceil := filepath.Join(dir, "ceilings.yaml")
	if err := os.WriteFile(ceil, []byte("default:\n  network: {allow: []}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, key := startServer(t, "--ceilings", ceil)
	secret := fmt.Sprintf("airlock-e2b-secret-%d", time.Now().UnixNano())
	secretFile := filepath.Join(dir, "secret")
	writeFile := filepath.Join(dir, "target")
	for _, f := range []string{secretFile, writeFile} {
		if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, secret) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	hostAddr := net.JoinHostPort(hostIP(t), strconv.Itoa(port))
	victim := exec.Command("sleep", "3600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- victim.Wait() }()
	t.Cleanup(func() { victim.Process.Kill(); <-exited })

	// Unconfined, each attack works: the same commands from the host.
	unconfined := map[string]string{
		"read":   "cat " + secretFile,
		"write":  "cat " + writeFile,
		"net":    "curl -s -m 5 http://" + hostAddr + "/ && curl -s -m 5 http://127.0.0.1:" + strconv.Itoa(port) + "/",
		"signal": "kill -0 " + strconv.Itoa(victim.Process.Pid) + " && echo " + secret,
	}
	for what, cmd := range unconfined {
		out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
		if err != nil || !strings.Contains(string(out), secret) {
			t.Fatalf("unconfined %s attack (%s) did not work on the host: %v %s", what, cmd, err, out)
		}
	}
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key,
		"ESC_SECRET=" + secret, "ESC_SECRET_FILE=" + secretFile, "ESC_WRITE_FILE=" + writeFile,
		"ESC_HOST_ADDR=" + hostAddr, "ESC_HOST_PORT=" + strconv.Itoa(port),
		"ESC_VICTIM_PID=" + strconv.Itoa(victim.Process.Pid)}, "tests/escape.test.mjs")
	if b, err := os.ReadFile(writeFile); err != nil || string(b) != secret {
		t.Errorf("host file written from the sandbox: %q %v", b, err)
	}
	select {
	case err := <-exited:
		t.Errorf("host process signalled from the sandbox: %v", err)
	default:
	}
}

// hostIP is a non-loopback address of this host.
func hostIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	testutil.Skip(t, "no non-loopback IPv4 address on this host")
	return ""
}
