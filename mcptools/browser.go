package mcptools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/api"
)

type navigateIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	URL       string `json:"url" jsonschema:"http(s), file or data URL to open; the browser reaches only what the sandbox may reach (servers you started inside it on 127.0.0.1, allowed hosts)"`
	Width     int    `json:"width,omitempty" jsonschema:"viewport width in pixels when this call starts the browser (default 1280)"`
	Height    int    `json:"height,omitempty" jsonschema:"viewport height in pixels when this call starts the browser (default 800)"`
}

type pageOut struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

type screenshotIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	URL       string `json:"url,omitempty" jsonschema:"open this URL first (default: the page browser_navigate opened)"`
	FullPage  bool   `json:"full_page,omitempty" jsonschema:"capture the whole page, not only the viewport"`
}

func (t *tools) registerBrowser(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "browser_navigate", Description: "Open a URL in a headless browser inside a sandbox (started on first use, " +
		"kept between calls) and return the page's final URL and title once it loaded. Serve your own pages inside the sandbox " +
		"(e.g. run_command with background=true) and open them at http://127.0.0.1:PORT/."}, t.browserNavigate)
	mcp.AddTool(s, &mcp.Tool{Name: "browser_screenshot", Description: "Take a PNG screenshot of the sandbox browser's page (optionally opening url first) " +
		"and return it as an image."}, t.browserScreenshot)
}

func (t *tools) browserNavigate(ctx context.Context, _ *mcp.CallToolRequest, in navigateIn) (*mcp.CallToolResult, pageOut, error) {
	const op = "browser_navigate"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, pageOut{}, explain(op, err, "")
	}
	p, err := t.cfg.Client.BrowserNavigate(ctx, in.SandboxID, api.BrowserNavigateRequest{URL: in.URL, Width: in.Width, Height: in.Height})
	if err != nil {
		return nil, pageOut{}, explain(op, err, "The sandbox's image needs Chromium for the browser tools.")
	}
	return text(fmt.Sprintf("loaded %s (title %q)", p.URL, p.Title)), pageOut{URL: p.URL, Title: p.Title}, nil
}

func (t *tools) browserScreenshot(ctx context.Context, _ *mcp.CallToolRequest, in screenshotIn) (*mcp.CallToolResult, pageOut, error) {
	const op = "browser_screenshot"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, pageOut{}, explain(op, err, "")
	}
	s, err := t.cfg.Client.BrowserScreenshot(ctx, in.SandboxID, api.BrowserScreenshotRequest{URL: in.URL, FullPage: in.FullPage})
	if err != nil {
		return nil, pageOut{}, explain(op, err, "The sandbox's image needs Chromium for the browser tools.")
	}
	res := text(fmt.Sprintf("screenshot of %s (title %q), %d bytes of PNG", s.URL, s.Title, len(s.Data)))
	res.Content = append(res.Content, &mcp.ImageContent{Data: s.Data, MIMEType: "image/png"})
	return res, pageOut{URL: s.URL, Title: s.Title}, nil
}
