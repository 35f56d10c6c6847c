package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// TestDialPort serves a page on the container's loopback (busybox httpd)
// and fetches it from the host through the agent's dial stream: the
// container has no network the host could reach it by.
func TestDialPort(t *testing.T) {
	b := testBackend(t)
	img := busyboxImage(t, b)
	sb := create(t, b, sandbox.Spec{Image: img, Policy: testPolicy(t, workspace(t), direct)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.Files().WriteFile(ctx, "/tmp/site/index.html", strings.NewReader("<h1>inside</h1>"), 0o644, true); err != nil {
		t.Fatal(err)
	}
	d, ok := sb.(sandbox.PortDialer)
	if !ok {
		t.Fatal("docker sandbox is not a sandbox.PortDialer")
	}
	if _, err := d.DialPort(ctx, 8080); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("dial before the server listens: %v, want ErrUnavailable", err)
	}
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/tmp/site"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	t0 := time.Now()
	var body string
	for i := 0; ; i++ {
		body, err = get(ctx, d, 8080, "/index.html")
		if err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("served after %s", time.Since(t0))
	if err != nil || !strings.Contains(body, "<h1>inside</h1>") {
		t.Fatalf("GET through dial: %v %q", err, body)
	}
}

// get sends one HTTP/1.0 request over a dialled stream.
func get(ctx context.Context, d sandbox.PortDialer, port int, path string) (string, error) {
	c, err := d.DialPort(ctx, port)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}
