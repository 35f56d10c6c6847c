package client_test

import (
	"flag"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// The examples and end-to-end tests drive a real `airlock serve` process
// (built from this tree) with the native backend over its unix socket.
// Where that cannot run (not Linux, not root) they run against a server in
// this process with the fake backend (sandbox/sandboxfake) instead, so a
// laptop run still tests the SDK: tests and examples that need a real
// sandbox (a shell, the host's processes, kill -9 of the server) ask for it
// with requireNative, which fails in CI.

// testServer is an airlock serve under test.
type testServer interface {
	client(t testing.TB, opts ...client.Option) *client.Client
	// newKey makes an API key of tenant.
	newKey(t testing.TB, tenant string) string
	// tcpURL is the server's TCP address ("" without one).
	tcpURL() string
	logText() string
	stop()
}

var (
	airlockBin string     // built once in TestMain (native mode)
	shared     testServer // the server the examples and most tests use
	native     *serveProc // shared, when it is a real airlock serve
)

func TestMain(m *testing.M) {
	dir, _ := os.MkdirTemp("", "airlock-client-test-")
	code := 0
	if reason := e2eUnavailable(); reason != "" {
		code = runFake(m, dir, reason)
	} else {
		code = runNative(m, dir)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func runNative(m *testing.M, dir string) int {
	bin, cleanup, err := buildAirlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: build airlock:", err)
		return 1
	}
	defer cleanup()
	airlockBin = bin
	native, err = startServe(dir, "--backend", "native")
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: start airlock serve:", err)
		return 1
	}
	shared = native
	os.Setenv(client.EnvHost, "unix://"+native.socket)
	defer shared.stop()
	return m.Run()
}

func runFake(m *testing.M, dir, reason string) int {
	if testutil.InCI() {
		fmt.Fprintf(os.Stderr, "client: the native backend is required in CI but unavailable: %s\n", reason)
		return 1
	}
	fmt.Fprintf(os.Stderr, "client: %s: testing against the fake backend in this process; tests that need real sandboxes skip\n", reason)
	// The examples need a real shell: leave them out unless -run asks.
	flag.Parse()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		f.Value.Set("^Test")
	}
	s, err := startFake(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: start a server with the fake backend:", err)
		return 1
	}
	shared = s
	os.Setenv(client.EnvHost, "unix://"+s.socket)
	defer s.stop()
	return m.Run()
}

// requireNative returns the shared real airlock serve, or skips (fails in
// CI) where it cannot run.
func requireNative(t testing.TB) *serveProc {
	t.Helper()
	if native == nil {
		testutil.Skip(t, "needs a real airlock serve with the native backend: "+e2eUnavailable())
	}
	return native
}

// newServer starts a server of its own for a test (with a TCP listener
// when tcp is set): a real one with the native backend, else the fake.
func newServer(t testing.TB, tcp bool) testServer {
	t.Helper()
	if native == nil {
		s, err := startFake(t.TempDir(), tcp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.stop)
		return s
	}
	args := []string{"--backend", "native"}
	if tcp {
		args = append(args, "--listen", freePort(t))
	}
	s, err := startServe(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond until it holds (generous deadline, no timing asserted).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
