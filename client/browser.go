package client

import (
	"context"

	"github.com/airlock-dev/airlock/api"
)

// BrowserNavigate opens url in sandbox id's headless browser (Chromium
// inside the sandbox, started on first use; the sandbox's image must have
// it) and returns the page's URL and title once it loaded.
func (c *Client) BrowserNavigate(ctx context.Context, id string, req api.BrowserNavigateRequest) (*api.BrowserPage, error) {
	var p api.BrowserPage
	if err := c.call(ctx, "POST", sbPath(id, "/browser/navigate"), nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// BrowserScreenshot returns a PNG of sandbox id's browser page, after
// navigating to req.URL first when it is set.
func (c *Client) BrowserScreenshot(ctx context.Context, id string, req api.BrowserScreenshotRequest) (*api.BrowserScreenshot, error) {
	var s api.BrowserScreenshot
	if err := c.call(ctx, "POST", sbPath(id, "/browser/screenshot"), nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
