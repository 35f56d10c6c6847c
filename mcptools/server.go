// Package mcptools exposes Airlock sandboxes to AI agents as Model Context
// Protocol tools (create_sandbox, run_command, run_code, write_file, ...),
// on the official MCP Go SDK. The tools are clients of the /v1 API through
// the Go SDK (package client), so an MCP server is only as strong as any
// other API caller: it must never widen what the operator configured (the
// model chooses neither the network allow-list nor the limits, it only
// reads them in the tool descriptions) and never hand the model an
// unbounded amount of output.
package mcptools

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/policy"
)

// Label marks the sandboxes created through these tools; list_sandboxes
// shows only those.
const Label = "airlock.mcp"

// Config is what the operator fixed for every sandbox the tools create.
type Config struct {
	Client  *client.Client
	Backend string // empty: the server's default
	Profile string // empty: "default"
	Image   string // empty: the backend's default root (e.g. airlock/browser:latest on docker for the browser tools)
	// Allow, when set, replaces the profile's network with an allow-list
	// (host[:port] entries, as in a policy).
	Allow []string
	// Memory, when set, is the sandboxes' memory limit ("1Gi").
	Memory string
	// Disk, when set, is the sandboxes' disk limit ("1Gi"): a disk volume
	// of their own, which checkpoints and rollback need on a server with
	// disk volumes.
	Disk string
	// Timeout is each sandbox's lifetime (30m when zero).
	Timeout time.Duration
	// Version is reported to MCP clients.
	Version string
	// Instance labels the sandboxes of this server (Label=Instance), so
	// that two MCP servers on one API see their own sandboxes only.
	Instance string
}

// Bounds on what one tool answer hands the model.
const (
	maxTextOut  = 64 << 10 // bytes of stdout/stderr/file text per answer
	maxFileRead = 1 << 20  // bytes read from a file
	maxEntries  = 500      // directory entries listed
)

// tools holds the state of one MCP server: workdirs of the sandboxes seen.
type tools struct {
	cfg      Config
	workdirs sync.Map // sandbox ID -> workdir
}

// NewServer returns an MCP server with the sandbox tools. Serve it with
// Run(ctx, &mcp.StdioTransport{}) or mcp.NewStreamableHTTPHandler.
func NewServer(cfg Config) *mcp.Server {
	if cfg.Profile == "" {
		cfg.Profile = "default"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.Instance == "" {
		cfg.Instance = "1"
	}
	t := &tools{cfg: cfg}
	s := mcp.NewServer(&mcp.Implementation{Name: "airlock", Title: "Airlock sandboxes", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: t.instructions()})
	t.register(s)
	return s
}

// reach describes, for the model, what a sandbox can and cannot reach.
func (t *tools) reach() string {
	var b strings.Builder
	network := policy.Network{}
	limits := policy.Limits{}
	if p, err := policy.Profile(t.cfg.Profile); err == nil {
		network, limits = p.Network, p.Limits
	}
	if len(t.cfg.Allow) > 0 {
		network = policy.Network{Mode: policy.NetworkAllowlist, Allow: t.cfg.Allow}
	}
	switch {
	case network.Mode == policy.NetworkAllowlist && len(network.Allow) > 0:
		fmt.Fprintf(&b, "Network: only %s, over HTTP(S) through a proxy (HTTP_PROXY/HTTPS_PROXY are set; tools that ignore them cannot connect); every other host is refused. ",
			strings.Join(network.Allow, ", "))
	case network.Mode == policy.NetworkOpen:
		b.WriteString("Network: open to public hosts through a proxy; private and local addresses are refused. ")
	default:
		b.WriteString("Network: none. The sandbox cannot reach the internet or the host: package installs (pip, npm) and downloads fail; use what is installed. ")
	}
	b.WriteString("Files: the host's system directories are visible read-only (so installed tools such as python3, node, sh, coreutils work); the sandbox can write only its working directory (its $HOME, returned by create_sandbox) and /tmp. ")
	mem := limits.Memory.String()
	if t.cfg.Memory != "" {
		mem = t.cfg.Memory
	}
	if limits.Memory > 0 || t.cfg.Memory != "" {
		fmt.Fprintf(&b, "Limits: %s of memory", mem)
		if limits.Pids > 0 {
			fmt.Fprintf(&b, ", %d processes", limits.Pids)
		}
		b.WriteString("; ")
	}
	fmt.Fprintf(&b, "each sandbox is destroyed %s after creation. Nothing inside can change these rules.", t.cfg.Timeout)
	return b.String()
}

func (t *tools) instructions() string {
	return "Airlock runs commands and code in isolated sandboxes. Call create_sandbox once, then use its id " +
		"with run_command, run_code, write_file, read_file and list_files; call destroy_sandbox when done. " +
		"run_code keeps Python (or JavaScript) state between calls in the same sandbox, like a notebook. " + t.reach()
}
