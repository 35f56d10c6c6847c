package docker

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/browser"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// BrowserImage is the image scripts/docker-images.sh builds from Debian's
// chromium package (make docker-images).
const BrowserImage = "airlock/browser:latest"

func browserImage(t *testing.T, b *Backend) string {
	t.Helper()
	e, err := b.engine()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ImageInspect(context.Background(), BrowserImage); err != nil {
		testutil.Skip(t, "no "+BrowserImage+" in the daemon (make docker-images builds it): "+err.Error())
	}
	return BrowserImage
}

const testPage = `<!doctype html><html><head><title>Airlock test page</title>
<style>body{margin:0;background:#fff}#box{position:absolute;left:0;top:0;width:200px;height:100px;background:rgb(255,0,0)}
#bar{position:absolute;left:0;top:300px;width:800px;height:50px;background:rgb(0,0,255)}</style></head>
<body><div id="box"></div><div id="bar"></div>
<p style="position:absolute;left:10px;top:150px;margin:0;font:bold 48px sans-serif;color:#000">Airlock</p></body></html>`

// TestBrowserScreenshot serves a page on the sandbox's own loopback
// (busybox httpd, inside), opens it in Chromium inside the same sandbox
// (no network: the page is all it can reach) driven from the host through
// the agent's dial stream, and checks the PNG: it decodes, has the
// viewport's size, and shows the page's red box and blue bar on white.
func TestBrowserScreenshot(t *testing.T) {
	b := testBackend(t)
	img := browserImage(t, b)
	ws := workspace(t)
	site := filepath.Join(ws, "site")
	if err := os.Mkdir(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte(testPage), 0o644); err != nil {
		t.Fatal(err)
	}
	bb := filepath.Join(ws, "busybox")
	copyBinary(t, "/bin/busybox", bb)
	sb := create(t, b, sandbox.Spec{Image: img, Policy: testPolicy(t, ws, func(p *policy.Policy) {
		direct(p)
		p.Limits.Memory = 1 << 30
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	httpd, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{bb, "httpd", "-f", "-p", "127.0.0.1:8000", "-h", site}})
	if err != nil {
		t.Fatal(err)
	}
	defer httpd.Kill(context.Background())

	t0 := time.Now()
	s, err := browser.Start(ctx, sb, browser.Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatalf("start browser: %v", err)
	}
	defer s.Close(context.Background())
	t.Logf("chromium ready in %s", time.Since(t0))
	var page browser.Page
	for i := 0; ; i++ { // httpd may still be starting
		page, err = s.Navigate(ctx, "http://127.0.0.1:8000/index.html")
		if err == nil || i == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("navigate: %v", err)
	}
	if page.Title != "Airlock test page" {
		t.Fatalf("page %+v", page)
	}
	shot, err := s.Screenshot(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot, 800, 600)
	if dir := os.Getenv("AIRLOCK_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "browser-test.png"), shot, 0o644)
	}

	// A page the sandbox cannot reach fails with Chromium's reason.
	if _, err := s.Navigate(ctx, "http://192.0.2.1:81/"); err == nil {
		t.Fatal("navigation to an outside address succeeded in a sandbox without network")
	} else {
		t.Logf("outside address: %v", err)
	}
}

// checkScreenshot decodes shot and checks its size and the test page's
// colours at known places.
func checkScreenshot(t *testing.T, shot []byte, w, h int) {
	t.Helper()
	im, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if got := im.Bounds(); got.Dx() != w || got.Dy() != h {
		t.Fatalf("screenshot is %dx%d, want %dx%d", got.Dx(), got.Dy(), w, h)
	}
	rgb := func(x, y int) [3]uint32 {
		r, g, b, _ := im.At(x, y).RGBA()
		return [3]uint32{r >> 8, g >> 8, b >> 8}
	}
	for _, c := range []struct {
		x, y int
		want [3]uint32
		what string
	}{
		{50, 50, [3]uint32{255, 0, 0}, "red box"},
		{400, 325, [3]uint32{0, 0, 255}, "blue bar"},
		{600, 150, [3]uint32{255, 255, 255}, "white page"},
	} {
		if got := rgb(c.x, c.y); got != c.want {
			t.Errorf("pixel (%d,%d) is %v, want %v (%s)", c.x, c.y, got, c.want, c.what)
		}
	}
	dark := 0 // the text's glyphs (fonts from the image)
	for y := 150; y < 210; y++ {
		for x := 10; x < 300; x++ {
			if c := rgb(x, y); c[0]+c[1]+c[2] < 150 {
				dark++
			}
		}
	}
	if dark < 200 {
		t.Errorf("only %d dark pixels where the text is: no text rendered", dark)
	}
	colours := map[[3]uint32]bool{}
	for y := 0; y < h; y += 7 {
		for x := 0; x < w; x += 7 {
			colours[rgb(x, y)] = true
		}
	}
	if len(colours) < 3 {
		t.Errorf("screenshot has %d colours: blank", len(colours))
	}
}

func copyBinary(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		testutil.Skip(t, "no "+from+" (install busybox-static): "+err.Error())
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
