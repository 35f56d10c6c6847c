package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// expose_port hands out a token URL that reaches a server inside the
// sandbox without an API key (python3 -m http.server on its loopback).
func TestMCPExposePort(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	s := mcpSession(t, []string{"AIRLOCK_HOST=unix://" + sock})
	res, _ := call(t, s, "create_sandbox", map[string]any{}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
		Workdir   string `json:"workdir"`
	}
	structured(t, res, &sb)
	defer call(t, s, "destroy_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, false)
	call(t, s, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "/tmp/site/index.html", "content": "exposed\n"}, false)
	call(t, s, "run_command", map[string]any{"sandbox_id": sb.SandboxID, "command": "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site", "background": true}, false)
	res, txt := call(t, s, "expose_port", map[string]any{"sandbox_id": sb.SandboxID, "port": 8000, "ttl": "5m"}, false)
	var out struct {
		URL string `json:"url"`
	}
	structured(t, res, &out)
	path, ok := strings.CutPrefix(out.URL, "http://airlock")
	if !ok || !strings.Contains(path, "/ports/8000/?token=") || !strings.Contains(txt, "placeholder") {
		t.Fatalf("expose_port: %q %s", out.URL, txt)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	u := "http://airlock" + strings.Replace(path, "/?token=", "/index.html?token=", 1)
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); resp.StatusCode == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body != "exposed\n" {
		t.Fatalf("through the exposed URL: %q", body)
	}
	call(t, s, "expose_port", map[string]any{"sandbox_id": sb.SandboxID, "port": 0}, true)
}
