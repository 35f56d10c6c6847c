package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// The browser is not the docker backend's alone: the project's browser
// image (built into dockerd by make docker-images), imported into a real
// airlock serve's image store, runs as a native image sandbox; the API
// opens a page served on the sandbox's loopback and returns its PNG.
func TestBrowserOnNative(t *testing.T) {
	requireNative(t)
	testutil.RequireRoot(t)
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", "airlock/browser:latest").Output()
	if err != nil {
		testutil.Skip(t, "no airlock/browser:latest in the docker daemon (make docker-images): "+err.Error())
	}
	id := strings.TrimPrefix(strings.TrimSpace(string(out)), "sha256:")
	store := imagestest.SharedStore(t)
	ref := "airlock-test/browser:" + id[:12]
	ctx := context.Background()
	if _, err := store.Inspect(ctx, ref); err != nil { // once per machine
		tar := filepath.Join(t.TempDir(), "browser.tar")
		if out, err := exec.Command("docker", "save", "-o", tar, "airlock/browser:latest").CombinedOutput(); err != nil {
			t.Fatalf("docker save: %v: %s", err, out)
		}
		if _, err := store.Import(ctx, tar, images.ImportOptions{Tag: ref}); err != nil {
			t.Fatal(err)
		}
		os.Remove(tar)
	}
	dir := t.TempDir()
	s, err := startServe(dir, "--backend", "native", "--image-store", store.Root())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	c := s.client(t)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: ref, Policy: json.RawMessage(`{"limits":{"memory":"1Gi"}}`)})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, sb.ID)
	page := `<!doctype html><title>native page</title><body style="margin:0;background:#fff"><div style="width:300px;height:200px;background:rgb(0,0,255)"></div></body>`
	if err := c.WriteFile(ctx, sb.ID, "/workspace/site/index.html", strings.NewReader(page), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"busybox", "httpd", "-f", "-p", "127.0.0.1:8000", "-h", "/workspace/site"}}); err != nil {
		t.Fatal(err)
	}
	var pg *api.BrowserPage
	for i := 0; ; i++ { // httpd may still be starting
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		pg, err = c.BrowserNavigate(cctx, sb.ID, api.BrowserNavigateRequest{URL: "http://127.0.0.1:8000/index.html"})
		cancel()
		if err == nil || i == 20 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || pg.Title != "native page" {
		t.Fatalf("navigate: %v %+v\n%s", err, pg, s.logText())
	}
	shot, err := c.BrowserScreenshot(ctx, sb.ID, api.BrowserScreenshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := png.Decode(bytes.NewReader(shot.Data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if r, g, b, _ := im.At(100, 100).RGBA(); r>>8 != 0 || g>>8 != 0 || b>>8 != 255 {
		t.Errorf("pixel (100,100) is %d,%d,%d, want the page's blue box", r>>8, g>>8, b>>8)
	}
}
