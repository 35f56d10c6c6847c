package main

import (
	"bytes"
	"context"
	"image/png"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The browser through every door at once: the Go SDK's MCP client drives
// `airlock mcp` (embedded server, docker backend, the browser image), which
// starts a sandbox, serves a page inside it (busybox httpd on the
// sandbox's loopback), opens it with browser_navigate and gets a PNG back
// from browser_screenshot.
func TestMCPBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	if out, err := exec.Command("docker", "image", "inspect", "airlock/browser:latest").CombinedOutput(); err != nil {
		testutil.Skip(t, "no airlock/browser:latest in the docker daemon (make docker-images): "+strings.TrimSpace(string(out)))
	}
	s := mcpSession(t, []string{"AIRLOCK_HOST="}, "--backend", "docker", "--image", "airlock/browser:latest", "--memory", "1Gi")
	res, _ := call(t, s, "create_sandbox", map[string]any{}, false)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
		Workdir   string `json:"workdir"`
	}
	structured(t, res, &sb)
	id := sb.SandboxID
	page := `<!doctype html><title>MCP page</title><body style="margin:0;background:#fff"><div style="width:300px;height:200px;background:rgb(0,128,0)"></div></body>`
	call(t, s, "write_file", map[string]any{"sandbox_id": id, "path": "site/index.html", "content": page}, false)
	call(t, s, "run_command", map[string]any{"sandbox_id": id, "command": "exec busybox httpd -f -p 127.0.0.1:8000 -h " + sb.Workdir + "/site", "background": true}, false)

	var txt string
	for i := 0; ; i++ { // httpd may still be starting
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "browser_navigate", Arguments: map[string]any{"sandbox_id": id, "url": "http://127.0.0.1:8000/index.html"}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		txt = r.Content[0].(*mcp.TextContent).Text
		if !r.IsError || i == 20 {
			if r.IsError {
				t.Fatalf("browser_navigate: %s", txt)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(txt, `"MCP page"`) {
		t.Fatalf("browser_navigate: %s", txt)
	}
	res, txt = call(t, s, "browser_screenshot", map[string]any{"sandbox_id": id}, false)
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" {
		t.Fatalf("browser_screenshot returned no PNG: %s", txt)
	}
	im, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("browser_screenshot: not a PNG: %v", err)
	}
	if b := im.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
		t.Fatalf("screenshot is %dx%d, want the default 1280x800", b.Dx(), b.Dy())
	}
	if r, g, b, _ := im.At(100, 100).RGBA(); r>>8 != 0 || g>>8 != 128 || b>>8 != 0 {
		t.Errorf("pixel (100,100) is %d,%d,%d, want the page's green box", r>>8, g>>8, b>>8)
	}
	if r, g, b, _ := im.At(900, 600).RGBA(); r>>8 != 255 || g>>8 != 255 || b>>8 != 255 {
		t.Errorf("pixel (900,600) is %d,%d,%d, want the white page", r>>8, g>>8, b>>8)
	}
	// A URL scheme the tools refuse is the caller's error, said plainly.
	_, txt = call(t, s, "browser_navigate", map[string]any{"sandbox_id": id, "url": "javascript:alert(1)"}, true)
	if !strings.Contains(txt, "scheme") {
		t.Errorf("refusal does not say why: %s", txt)
	}
	call(t, s, "destroy_sandbox", map[string]any{"sandbox_id": id}, false)
}
