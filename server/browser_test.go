package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// Bad browser requests are 4xx answers that say what is wrong, before any
// browser starts; a sandbox the server cannot dial into is 501. (The
// browser itself runs in real sandboxes: backend/docker and the MCP test.)
func TestBrowserBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req  api.BrowserNavigateRequest
		kind error
		says string
	}{
		{api.BrowserNavigateRequest{URL: "javascript:alert(1)"}, sandbox.ErrInvalid, `scheme "javascript" not allowed`},
		{api.BrowserNavigateRequest{URL: ""}, sandbox.ErrInvalid, "scheme"},
		{api.BrowserNavigateRequest{URL: "http://127.0.0.1/", Width: 5000}, sandbox.ErrInvalid, "viewport 5000x0"},
		{api.BrowserNavigateRequest{URL: "http://127.0.0.1/"}, sandbox.ErrNotSupported, "cannot be dialled into"},
	}
	for _, tc := range cases {
		_, err := c.BrowserNavigate(ctx, sb.ID, tc.req)
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %v saying %q", tc.req, err, tc.kind, tc.says)
		}
	}
	if _, err := c.BrowserScreenshot(ctx, sb.ID, api.BrowserScreenshotRequest{URL: "chrome://settings"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("screenshot of chrome://settings: %v", err)
	}
	if _, err := c.BrowserScreenshot(ctx, "sb-nope", api.BrowserScreenshotRequest{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing sandbox: %v", err)
	}
}
