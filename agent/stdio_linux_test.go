package agent

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// pipeConn joins a child's stdout (read) and stdin (write).
type pipeConn struct {
	io.Reader
	io.WriteCloser
}

func (p pipeConn) Close() error { return p.WriteCloser.Close() }

// testStdio drives a guest serving over its stdin/stdout: exec works, stray
// prints do not corrupt the stream, and closing the stream ends the agent.
func testStdio(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(pipeConn{out, in}, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := c.Hello(ctx, baseConfig()); err != nil {
		t.Fatalf("hello: %v; stderr: %s", err, stderr.String())
	}
	r := mustRun(t, c, sh("echo hi; echo err >&2"))
	if r.stdout != "hi\n" || r.stderr != "err\n" {
		t.Fatalf("got %+v", r)
	}
	c.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exit: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("agent did not exit when its stream closed")
	}
}

func TestStdioConn(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"=stdio")
	testStdio(t, cmd)
}

// TestAirlockAgentServe runs the real `airlock agent serve`.
func TestAirlockAgentServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the airlock binary")
	}
	testStdio(t, exec.Command(testutil.AirlockBinary(t), "agent", "serve"))
}
