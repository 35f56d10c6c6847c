package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// mcpSession connects the Go SDK's MCP client to `airlock mcp ARGS` over
// the real binary's stdio. env is added to the process's environment.
func mcpSession(t *testing.T, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	testutil.RequireLinux(t)
	cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "airlock-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to airlock mcp: %v; stderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("airlock mcp stderr:\n%s", stderr.String())
		}
	})
	return s
}

// call calls a tool; it fails the test on a protocol error, and on a tool
// error unless wantError.
func call(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, wantError bool) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var txt strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			txt.WriteString(tc.Text)
		}
	}
	if res.IsError != wantError {
		t.Fatalf("%s: IsError=%v, want %v: %s", name, res.IsError, wantError, txt.String())
	}
	return res, txt.String()
}

func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// The must-show flow: the Go SDK's MCP client drives `airlock mcp` over
// stdio (with its embedded server and the native backend): list the tools,
// create a sandbox, run_code twice (state kept; a matplotlib PNG), write a
// file, read it back, destroy the sandbox.
func TestMCPStdioFlow(t *testing.T) {
	testutil.RequireRoot(t)
	s := mcpSession(t, []string{"AIRLOCK_HOST="}, "--backend", "native", "--allow", "pypi.org:443", "--memory", "1Gi")
	ctx := context.Background()

	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "run_command" && (!strings.Contains(tl.Description, "pypi.org:443") || !strings.Contains(tl.Description, "1Gi")) {
			t.Errorf("run_command's description must state the allow-list and limits: %s", tl.Description)
		}
	}
	for _, want := range []string{"create_sandbox", "list_sandboxes", "destroy_sandbox", "run_command", "run_code", "write_file", "read_file", "list_files"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s missing (have %v)", want, names)
		}
	}

	res, _ := call(t, s, "create_sandbox", map[string]any{}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
		Workdir   string `json:"workdir"`
	}
	structured(t, res, &sb)
	if !strings.HasPrefix(sb.SandboxID, "sb-") || sb.Workdir == "" {
		t.Fatalf("create_sandbox: %+v", sb)
	}
	id := sb.SandboxID

	_, txt := call(t, s, "run_code", map[string]any{"sandbox_id": id, "code": "total = 40\nprint('set')"}, false)
	if !strings.Contains(txt, "set") {
		t.Fatalf("run_code 1: %s", txt)
	}
	res, txt = call(t, s, "run_code", map[string]any{"sandbox_id": id, "code": "total + 2"}, false)
	var code struct {
		Result string `json:"result"`
	}
	structured(t, res, &code)
	if code.Result != "42" || !strings.Contains(txt, "42") {
		t.Fatalf("run_code 2 must see the state of run_code 1: %+v %s", code, txt)
	}

	t.Run("matplotlib", func(t *testing.T) {
		_, txt := call(t, s, "run_command", map[string]any{"sandbox_id": id, "command": "python3 -c 'import matplotlib' && echo yes"}, false)
		if !strings.Contains(txt, "yes") {
			testutil.Skip(t, "matplotlib is not installed for the sandbox's python3 (apt-get install python3-matplotlib)")
		}
		res, txt := call(t, s, "run_code", map[string]any{"sandbox_id": id,
			"code": "import matplotlib.pyplot as plt\nplt.plot([0, 1, 4, 9])\nplt.title('squares')\nplt.show()"}, false)
		var img *mcp.ImageContent
		for _, c := range res.Content {
			if ic, ok := c.(*mcp.ImageContent); ok {
				img = ic
			}
		}
		if img == nil || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("want a PNG image: %s", txt)
		}
	})

	res, _ = call(t, s, "write_file", map[string]any{"sandbox_id": id, "path": "notes/hello.txt", "content": "hello from MCP\n"}, false)
	var w struct {
		Path string `json:"path"`
	}
	structured(t, res, &w)
	if w.Path != sb.Workdir+"/notes/hello.txt" {
		t.Fatalf("relative paths are under the workdir: %+v", w)
	}
	res, _ = call(t, s, "read_file", map[string]any{"sandbox_id": id, "path": w.Path}, false)
	var r struct {
		Content string `json:"content"`
	}
	structured(t, res, &r)
	if r.Content != "hello from MCP\n" {
		t.Fatalf("read_file: %+v", r)
	}
	_, txt = call(t, s, "list_files", map[string]any{"sandbox_id": id, "path": "notes"}, false)
	if !strings.Contains(txt, "hello.txt") {
		t.Fatalf("list_files: %s", txt)
	}
	_, txt = call(t, s, "run_command", map[string]any{"sandbox_id": id, "command": "cat hello.txt; echo err >&2; exit 3", "cwd": "notes"}, false)
	if !strings.Contains(txt, "exit code 3") || !strings.Contains(txt, "hello from MCP") || !strings.Contains(txt, "err") {
		t.Fatalf("run_command: %s", txt)
	}
	_, txt = call(t, s, "list_sandboxes", map[string]any{}, false)
	if !strings.Contains(txt, id) {
		t.Fatalf("list_sandboxes: %s", txt)
	}

	// Errors are tool errors whose text says what to do.
	_, txt = call(t, s, "write_file", map[string]any{"sandbox_id": id, "path": "/etc/evil", "content": "x"}, true)
	if !strings.Contains(txt, "workdir") {
		t.Fatalf("a refused write must say where to write: %s", txt)
	}
	_, txt = call(t, s, "run_code", map[string]any{"sandbox_id": "sb-0000", "code": "1"}, true)
	if !strings.Contains(txt, "create_sandbox") {
		t.Fatalf("a missing sandbox must point at create_sandbox: %s", txt)
	}
	_, txt = call(t, s, "run_command", map[string]any{"sandbox_id": id, "command": "curl -sS https://example.com"}, false)
	if strings.Contains(txt, "exit code 0") {
		t.Fatalf("a host outside the allow-list must be refused: %s", txt)
	}

	call(t, s, "destroy_sandbox", map[string]any{"sandbox_id": id}, false)
	_, txt = call(t, s, "read_file", map[string]any{"sandbox_id": id, "path": w.Path}, true)
	if !strings.Contains(txt, "create_sandbox") {
		t.Fatalf("after destroy: %s", txt)
	}
}

// Background commands and their output through get_process_output.
func TestMCPBackgroundCommand(t *testing.T) {
	testutil.RequireRoot(t)
	s := mcpSession(t, []string{"AIRLOCK_HOST="}, "--backend", "native")
	res, _ := call(t, s, "create_sandbox", map[string]any{"env": map[string]any{"GREETING": "hi"}}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	structured(t, res, &sb)
	defer call(t, s, "destroy_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, false)
	res, _ = call(t, s, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "echo $GREETING $X; sleep 0.2; echo done",
		"env": map[string]any{"X": "there"}, "background": true}, false)
	var started struct {
		ProcessID string `json:"process_id"`
	}
	structured(t, res, &started)
	if started.ProcessID == "" {
		t.Fatal("no process_id")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, _ := call(t, s, "get_process_output", map[string]any{"sandbox_id": sb.SandboxID, "process_id": started.ProcessID}, false)
		var po struct {
			Running  bool   `json:"running"`
			ExitCode *int   `json:"exit_code"`
			Output   string `json:"output"`
		}
		structured(t, res, &po)
		if !po.Running {
			if po.ExitCode == nil || *po.ExitCode != 0 || po.Output != "hi there\ndone\n" {
				t.Fatalf("%+v", po)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background process did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, txt := call(t, s, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "sleep 5", "timeout_seconds": 1}, false)
	if !strings.Contains(txt, "timeout") {
		t.Fatalf("a timed-out command must say so: %s", txt)
	}
}

// `airlock mcp --http` serves the same tools over streamable HTTP, and
// refuses to listen beyond loopback without a token.
func TestMCPStreamableHTTP(t *testing.T) {
	testutil.RequireLinux(t)
	bin := testutil.AirlockBinary(t)
	out, err := exec.Command(bin, "mcp", "--http", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), envMCPToken) {
		t.Fatalf("beyond loopback without a token must be refused: %v %s", err, out)
	}

	sock := sbServe(t, "wasm")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "mcp", "--http", addr, "--host", "unix://"+sock, "--backend", "wasm")
	cmd.Env = append(os.Environ(), envMCPToken+"=s3cret")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "serving MCP") {
		if time.Now().After(deadline) {
			t.Fatalf("airlock mcp --http did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	endpoint := fmt.Sprintf("http://%s/mcp", addr)
	c := mcp.NewClient(&mcp.Implementation{Name: "airlock-test", Version: "1"}, nil)
	if _, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil); err == nil {
		t.Fatal("a client without the token must be refused")
	}
	hc := &http.Client{Transport: bearer{"s3cret"}}
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect: %v; %s", err, stderr.String())
	}
	defer s.Close()
	res, _ := call(t, s, "create_sandbox", map[string]any{}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	structured(t, res, &sb)
	call(t, s, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "/tmp/x.txt", "content": "over http"}, false)
	_, txt := call(t, s, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "/tmp/x.txt"}, false)
	if !strings.Contains(txt, "over http") {
		t.Fatalf("read_file: %s", txt)
	}
	call(t, s, "destroy_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, false)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// checkpoint and rollback as MCP tools: a file the agent wrecked comes
// back; another MCP server's sandbox is not found.
func TestMCPCheckpointRollback(t *testing.T) {
	testutil.RequireRoot(t)
	s := mcpSession(t, []string{"AIRLOCK_HOST="}, "--backend", "native")
	res, _ := call(t, s, "create_sandbox", map[string]any{}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	structured(t, res, &sb)
	call(t, s, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "app.py", "content": "print('good')\n"}, false)
	res, _ = call(t, s, "checkpoint", map[string]any{"sandbox_id": sb.SandboxID, "name": "good"}, false)
	var cp struct {
		CheckpointID string `json:"checkpoint_id"`
	}
	structured(t, res, &cp)
	call(t, s, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "rm -rf ./* && echo broken > app.py"}, false)
	call(t, s, "rollback", map[string]any{"sandbox_id": sb.SandboxID, "checkpoint_id": cp.CheckpointID}, false)
	if _, txt := call(t, s, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "app.py"}, false); !strings.Contains(txt, "print('good')") {
		t.Fatalf("after rollback: %s", txt)
	}
	_, txt := call(t, s, "rollback", map[string]any{"sandbox_id": sb.SandboxID, "checkpoint_id": "cp-0000000000000000"}, true)
	if !strings.Contains(txt, "not found") {
		t.Fatalf("rollback to a missing checkpoint: %s", txt)
	}
}

// `airlock mcp --http` needs a token even on loopback unless told
// --insecure-no-auth; a configured server that does not answer is an
// error, not a reason to embed one; the server in use is named at start
// (issue 24 items 10 and 13).
func TestMCPNamesItsServerAndFailsClosed(t *testing.T) {
	testutil.RequireLinux(t)
	bin := testutil.AirlockBinary(t)
	runMCP := func(env []string, args ...string) (string, int) {
		// Bounded: an airlock mcp that does not fail closed keeps serving.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"mcp"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	noHost := []string{"AIRLOCK_HOST=", envMCPToken + "="}
	if out, code := runMCP(noHost, "--http", "127.0.0.1:0"); code != 125 || !strings.Contains(out, envMCPToken) || !strings.Contains(out, "--insecure-no-auth") {
		t.Errorf("--http on loopback without a token: %d %q, want 125 naming $%s and --insecure-no-auth", code, out, envMCPToken)
	}
	dead := "unix://" + filepath.Join(t.TempDir(), "nobody.sock")
	if out, code := runMCP(noHost, "--host", dead); code != 125 || !strings.Contains(out, dead) || !strings.Contains(out, "does not answer") {
		t.Errorf("an unreachable --host: %d %q, want 125 naming it", code, out)
	}
	if out, code := runMCP([]string{"AIRLOCK_HOST=" + dead}); code != 125 || !strings.Contains(out, dead) {
		t.Errorf("an unreachable $AIRLOCK_HOST: %d %q, want 125 naming it", code, out)
	}
	sock := sbServe(t, "wasm")
	if out, code := runMCP([]string{"AIRLOCK_HOST=unix://" + sock}); code != 0 || !strings.Contains(out, "sandboxes from airlock serve at unix://"+sock) {
		t.Errorf("a reachable server: %d %q, want it named", code, out)
	}
	if out, code := runMCP(noHost, "--backend", "wasm"); code != 0 || !strings.Contains(out, "embedded in this process") {
		t.Errorf("no host: %d %q, want the embedded server named", code, out)
	}
}
