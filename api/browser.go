package api

// BrowserNavigateRequest is the body of POST
// /v1/sandboxes/{id}/browser/navigate: open URL in the sandbox's browser
// (headless Chromium inside the sandbox, started on first use).
type BrowserNavigateRequest struct {
	URL string `json:"url"`
	// Width and Height set the viewport when this call starts the browser
	// (default 1280x800, at most 4096 each); ignored afterwards.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// BrowserPage is where the browser's page is.
type BrowserPage struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// BrowserScreenshotRequest is the body of POST
// /v1/sandboxes/{id}/browser/screenshot: a PNG of the page, after
// navigating to URL first when it is set.
type BrowserScreenshotRequest struct {
	URL      string `json:"url,omitempty"`
	FullPage bool   `json:"full_page,omitempty"`
	Width    int    `json:"width,omitempty"`
	Height   int    `json:"height,omitempty"`
}

// BrowserScreenshot is a screenshot; Data is base64 in JSON.
type BrowserScreenshot struct {
	BrowserPage
	Format string `json:"format"` // "png"
	Data   []byte `json:"data"`
}
