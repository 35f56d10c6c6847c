package client_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// The examples and end-to-end tests drive a real `airlock serve` process
// (built from this tree) with the native backend over its unix socket.

var (
	airlockBin string     // built once in TestMain
	shared     *serveProc // the server the examples use
)

func TestMain(m *testing.M) {
	if reason := e2eUnavailable(); reason != "" {
		if testutil.InCI() {
			fmt.Fprintf(os.Stderr, "client: required in CI but unavailable: %s\n", reason)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "client: SKIP examples and end-to-end tests: %s\n", reason)
		os.Exit(0)
	}
	bin, cleanup, err := buildAirlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: build airlock:", err)
		os.Exit(1)
	}
	airlockBin = bin
	dir, _ := os.MkdirTemp("", "airlock-client-test-")
	shared, err = startServe(dir, "--backend", "native")
	if err != nil {
		fmt.Fprintln(os.Stderr, "client: start airlock serve:", err)
		cleanup()
		os.Exit(1)
	}
	os.Setenv(client.EnvHost, "unix://"+shared.socket)
	code := m.Run()
	shared.stop()
	os.RemoveAll(dir)
	cleanup()
	os.Exit(code)
}

func e2eUnavailable() string {
	if runtime.GOOS != "linux" {
		return "needs Linux"
	}
	if os.Geteuid() != 0 {
		return "needs root (the native backend)"
	}
	return ""
}

func buildAirlock() (string, func(), error) {
	if p := os.Getenv("AIRLOCK_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		return abs, func() {}, err
	}
	dir, err := os.MkdirTemp("", "airlock-client-bin-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "airlock")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/airlock-dev/airlock/cmd/airlock")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("%v: %s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// serveProc is one running `airlock serve`.
type serveProc struct {
	cmd    *exec.Cmd
	data   string
	socket string
	tcp    string // "http://127.0.0.1:PORT" when started with TCP
	log    *os.File
	args   []string
}

// startServe starts airlock serve with data dir dir and extra flags; it
// returns once the server answers /healthz.
func startServe(dir string, extra ...string) (*serveProc, error) {
	s := &serveProc{data: filepath.Join(dir, "data"), socket: filepath.Join(dir, "airlock.sock")}
	for i, a := range extra {
		if a == "--listen" && i+1 < len(extra) {
			s.tcp = "http://" + extra[i+1]
		}
	}
	s.args = append([]string{"serve", "--socket", s.socket, "--data", s.data, "--log-level", "debug"}, extra...)
	return s, s.start()
}

func (s *serveProc) start() error {
	logf, err := os.OpenFile(s.data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		os.MkdirAll(filepath.Dir(s.data), 0o700)
		if logf, err = os.OpenFile(s.data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
			return err
		}
	}
	s.log = logf
	s.cmd = exec.Command(airlockBin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server must not outlive a test binary that dies (a panic in an
	// example): the parent-death signal ends it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	c, err := client.New("unix://" + s.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("airlock serve exited: %v; log:\n%s", err, s.logText())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			go func() { <-exited }()
			return nil
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			return fmt.Errorf("airlock serve did not answer: %v; log:\n%s", err, s.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *serveProc) logText() string {
	b, _ := os.ReadFile(s.data + ".log")
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// stop asks the server to shut down (SIGTERM) and waits for it.
func (s *serveProc) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 600; i++ {
		if syscall.Kill(s.cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.log.Close()
}

// kill9 kills the server with SIGKILL (a crash) and waits until it is gone.
func (s *serveProc) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	for i := 0; i < 600; i++ {
		if syscall.Kill(s.cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.log.Close()
}

func (s *serveProc) client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New("unix://"+s.socket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newKey makes an API key of tenant with the CLI (the server is running).
func (s *serveProc) newKey(t testing.TB, tenant string) string {
	t.Helper()
	out, err := exec.Command(airlockBin, "serve", "key", "create", "--data", s.data, "--tenant", tenant).Output()
	if err != nil {
		t.Fatalf("key create: %v", err)
	}
	return strings.TrimSpace(string(out))
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
