package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// The test binary doubles as the guest: with AGENT_TEST_MODE set it does
// not run tests but plays a role in a child process.
const modeEnv = "AGENT_TEST_MODE"

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		// The channel is fd 3 (ExtraFiles[0]).
		conn := os.NewFile(3, "channel")
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		noPTYPeer = os.Getenv("AGENT_TEST_NO_PTYPEER") != ""
		if os.Getenv("AGENT_TEST_NO_OPENAT2") != "" {
			noOpenat2.Store(true)
		}
		if os.Getenv("AGENT_TEST_MOUNT_PROC") != "" {
			mountProc()
		}
		err := Serve(context.Background(), conn, ServeOptions{Log: log, Root: os.Getenv("AGENT_TEST_ROOT")})
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio":
		// As `airlock agent serve`: the channel is stdin/stdout.
		conn, err := StdioConn()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("stray output must not reach the channel")
		if err := Serve(context.Background(), conn, ServeOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "dial":
		os.Exit(dialEcho(os.Args[len(os.Args)-1]))
	case "dial-bulk":
		os.Exit(dialBulk(os.Args[len(os.Args)-1]))
	case "naive-init":
		os.Exit(naiveInit())
	default:
		fmt.Fprintln(os.Stderr, "unknown", modeEnv)
		os.Exit(2)
	}
}

// dialEcho connects to addr, sends a line and prints what comes back.
func dialEcho(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Fprint(c, "hello through the tunnel\n")
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Stdout.Write(b)
	return 0
}

// dialBulk sends 8 MiB through addr and checks that the same bytes come
// back (the echo handler copies them), concurrently in both directions.
func dialBulk(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	const size = 8 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i % 253)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		c.(*net.TCPConn).CloseWrite()
		errc <- err
	}()
	back, err := io.ReadAll(c)
	if err != nil || <-errc != nil || !bytes.Equal(back, data) {
		fmt.Fprintf(os.Stderr, "bulk echo: %d bytes back, err %v\n", len(back), err)
		return 1
	}
	fmt.Print("bulk ok")
	return 0
}

func mountProc() {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "make / private:", err)
		os.Exit(1)
	}
	if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		fmt.Fprintln(os.Stderr, "mount proc:", err)
		os.Exit(1)
	}
}

// guestProcess is a guest started in a child process.
type guestProcess struct {
	cmd    *exec.Cmd
	client *Client
	stderr *syncBuffer
}

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

type guestOptions struct {
	root     string
	client   ClientOptions
	config   *GuestConfig
	sys      *unix.SysProcAttr
	extraEnv []string
	noHello  bool
	binary   string     // the test binary to run (default os.Args[0])
	inherit  []*os.File // extra descriptors the guest inherits (fd 4 on)
}

// socketpair returns a connected pair: the host end as a net.Conn, the
// guest end as a file to pass to a child.
func socketpair(t testing.TB) (net.Conn, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	hf := os.NewFile(uintptr(fds[0]), "host")
	hc, err := net.FileConn(hf)
	hf.Close()
	if err != nil {
		t.Fatal(err)
	}
	return hc, os.NewFile(uintptr(fds[1]), "guest")
}

func baseConfig() GuestConfig {
	return GuestConfig{
		Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/tmp", "LANG=C"},
		Workdir: "/",
		UID:     -1,
		GID:     -1,
	}
}

// startGuest runs Serve in a child process connected by a socketpair and
// returns a Client that said Hello to it.
func startGuest(t testing.TB, o guestOptions) *guestProcess {
	t.Helper()
	hc, gf := socketpair(t)
	bin := o.binary
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), modeEnv+"=serve", "AGENT_TEST_ROOT="+o.root)
	cmd.Env = append(cmd.Env, o.extraEnv...)
	cmd.ExtraFiles = append([]*os.File{gf}, o.inherit...)
	g := &guestProcess{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = g.stderr
	cmd.SysProcAttr = o.sys
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gf.Close()
	c, err := NewClient(hc, o.client)
	if err != nil {
		t.Fatal(err)
	}
	g.client = c
	t.Cleanup(func() {
		c.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("guest did not exit after the session closed; stderr:\n%s", g.stderr)
		}
	})
	if !o.noHello {
		cfg := baseConfig()
		if o.config != nil {
			cfg = *o.config
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Hello(ctx, cfg); err != nil {
			t.Fatalf("hello: %v; guest stderr:\n%s", err, g.stderr)
		}
	}
	return g
}

type result struct {
	stdout, stderr string
	status         sandbox.ExitStatus
	err            error
}

// run execs req and waits for it, collecting output.
func run(t testing.TB, c *Client, req sandbox.ExecRequest) result {
	t.Helper()
	ctx := testCtx(t)
	var out, errb syncBuffer
	if req.Stdout == nil {
		req.Stdout = &out
	}
	if req.Stderr == nil && !req.TTY {
		req.Stderr = &errb
	}
	p, err := c.Exec(ctx, req)
	if err != nil {
		return result{err: err}
	}
	st, err := p.Wait(ctx)
	return result{stdout: out.String(), stderr: errb.String(), status: st, err: err}
}

func sh(script string) sandbox.ExecRequest {
	return sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}}
}

func mustRun(t testing.TB, c *Client, req sandbox.ExecRequest) result {
	t.Helper()
	r := run(t, c, req)
	if r.err != nil {
		t.Fatalf("%v: %v", req.Args, r.err)
	}
	return r
}
