package browser

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxfake"
)

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8000/", "https://example.com/a?b", "file:///tmp/x.html", "data:text/html,<p>x", "about:blank"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"javascript:alert(1)", "chrome://settings", "about:config", "http:///nohost", "ftp://x/", "", "view-source:http://x/"} {
		if err := CheckURL(bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func TestFlags(t *testing.T) {
	f := Flags(Options{})
	for _, want := range []string{"--headless", "--no-sandbox", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=9222",
		"--disable-background-networking", "--no-proxy-server", "--window-size=1280,800"} {
		if !slices.Contains(f, want) {
			t.Errorf("flags lack %s: %v", want, f)
		}
	}
	f = Flags(Options{Proxy: "http://127.0.0.1:3128", Port: 9333, Width: 640, Height: 480})
	for _, want := range []string{"--proxy-server=http://127.0.0.1:3128", "--remote-debugging-port=9333", "--window-size=640,480"} {
		if !slices.Contains(f, want) {
			t.Errorf("flags lack %s: %v", want, f)
		}
	}
	if slices.Contains(f, "--no-proxy-server") {
		t.Errorf("both a proxy and no proxy: %v", f)
	}
}

// A sandbox the host cannot dial into cannot have a browser, and bad
// options are refused before anything starts.
func TestStartRefuses(t *testing.T) {
	b := sandboxfake.New("fake")
	sb, err := b.Create(context.Background(), sandbox.Spec{ID: "sb-browser", Policy: &policy.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if _, err := Start(context.Background(), sb, Options{}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Fatalf("start in a sandbox without dial: %v", err)
	}
	if _, err := Start(context.Background(), sb, Options{Width: MaxSide + 1}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("start with a huge viewport: %v", err)
	}
}
