package client_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

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

func (s *serveProc) logText() string {
	b, _ := os.ReadFile(s.data + ".log")
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
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

func (s *serveProc) tcpURL() string { return s.tcp }
