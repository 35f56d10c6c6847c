package mcptools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type exposeIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Port      int    `json:"port" jsonschema:"TCP port a server inside the sandbox listens on (on 127.0.0.1 is enough)"`
	TTL       string `json:"ttl,omitempty" jsonschema:"how long the URL works, e.g. 30m (default 15m, at most 24h)"`
}

type exposeOut struct {
	URL        string `json:"url"`
	PreviewURL string `json:"preview_url,omitempty"`
	ExpiresAt  string `json:"expires_at"`
}

func (t *tools) registerPorts(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "expose_port", Description: "Return a URL that reaches a port inside a sandbox (a web app or API you started " +
		"there, e.g. with run_command background=true) from a browser, without an API key, until it expires. " +
		"The sandbox needs no network for this: the server carries the requests."}, t.exposePort)
}

func (t *tools) exposePort(ctx context.Context, _ *mcp.CallToolRequest, in exposeIn) (*mcp.CallToolResult, exposeOut, error) {
	const op = "expose_port"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, exposeOut{}, explain(op, err, "")
	}
	var ttl time.Duration
	if in.TTL != "" {
		d, err := time.ParseDuration(in.TTL)
		if err != nil {
			return nil, exposeOut{}, explain(op, fmt.Errorf("ttl %q: %w", in.TTL, errMissing), "Give a duration such as 30m.")
		}
		ttl = d
	}
	tok, err := t.cfg.Client.PortToken(ctx, in.SandboxID, in.Port, ttl)
	if err != nil {
		return nil, exposeOut{}, explain(op, err, "")
	}
	out := exposeOut{URL: tok.URL, PreviewURL: tok.PreviewURL, ExpiresAt: tok.ExpiresAt.Format(time.RFC3339)}
	msg := fmt.Sprintf("port %d of %s is at %s until %s", in.Port, in.SandboxID, tok.URL, out.ExpiresAt)
	if tok.PreviewURL != "" {
		msg += fmt.Sprintf(" (at / of its own host: %s)", tok.PreviewURL)
	}
	if strings.HasPrefix(tok.URL, "http://airlock/") {
		msg += ". The server is on a unix socket here, so the URL's host is a placeholder: put the server's public address " +
			"in its place, or run `airlock sandbox port-forward " + in.SandboxID + " " + fmt.Sprint(in.Port) + "` for a local one"
	}
	return text(msg), out, nil
}
