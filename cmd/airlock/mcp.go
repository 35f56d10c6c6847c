package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/mcptools"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server"
	"github.com/airlock-dev/airlock/server/admission"
)

func init() {
	register(command{name: "mcp", short: "serve sandboxes to AI agents as MCP tools (stdio or streamable HTTP)", run: runMCP})
}

// envMCPToken is the bearer token `airlock mcp --http` requires (and must
// have to listen beyond loopback).
const envMCPToken = "AIRLOCK_MCP_TOKEN"

const mcpUsage = `usage: airlock mcp [--host H] [--http ADDR] [--profile P] [--allow HOST]... [--memory SIZE] [--timeout D]

Serves the sandbox tools (create_sandbox, run_command, run_code, write_file,
read_file, list_files, list_sandboxes, destroy_sandbox) over MCP: on stdio by
default, or over streamable HTTP at http://ADDR/mcp with --http.

The sandboxes come from $AIRLOCK_HOST (or --host) with $AIRLOCK_API_KEY, which
must answer at start (no fallback); when neither is set, from a server
embedded in this process, whose sandboxes end with it. Either way the first
line on stderr names the server. --http needs a bearer token in
$AIRLOCK_MCP_TOKEN (on loopback, --insecure-no-auth serves without one).
See docs/mcp.md.
`

func runMCP(args []string) int {
	fs := flag.NewFlagSet("airlock mcp", flag.ContinueOnError)
	host := fs.String("host", os.Getenv(client.EnvHost), "airlock serve to use (unix:///path, http(s)://host:port); empty: an embedded server")
	httpAddr := fs.String("http", "", "serve MCP over streamable HTTP on this address (path /mcp) instead of stdio")
	backendName := fs.String("backend", "", "backend of the sandboxes (default: the server's)")
	profile := fs.String("profile", "default", "policy profile of the sandboxes")
	image := fs.String("image", "", "image of the sandboxes (docker: an image of the daemon, e.g. airlock/browser:latest for the browser tools)")
	var allow stringList
	fs.Var(&allow, "allow", "a host[:port] the sandboxes may reach (repeatable; replaces the profile's network)")
	memory := fs.String("memory", "", "memory limit of each sandbox, e.g. 1Gi (default: the profile's)")
	disk := fs.String("disk", "auto", "disk limit of each sandbox (its workspace and checkpoints): a size, \"\" (the profile's) or auto (1Gi on the native backend, which checkpoints need; else the profile's)")
	timeout := fs.Duration("timeout", 30*time.Minute, "lifetime of each sandbox")
	data := fs.String("data", "", "data directory of the embedded server (default: a new temporary one, removed at exit)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	noAuth := fs.Bool("insecure-no-auth", false, "with --http on loopback: serve without $"+envMCPToken+" (any local user could then run code through it)")
	fs.Usage = func() { fmt.Fprint(os.Stderr, mcpUsage); fs.PrintDefaults() }
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitAirlock
	}
	if fs.NArg() > 0 {
		return fail("mcp", fmt.Errorf("unexpected argument %q: %w", fs.Arg(0), sandbox.ErrInvalid))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail("mcp", fmt.Errorf("--log-level %q: %w", *logLevel, sandbox.ErrInvalid))
	}
	// stdout carries the MCP protocol: logs go to stderr only.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *httpAddr != "" && !*noAuth && os.Getenv(envMCPToken) == "" {
		return fail("mcp", fmt.Errorf("--http %s: a bearer token is required: set $%s (or, on loopback only, --insecure-no-auth): %w", *httpAddr, envMCPToken, sandbox.ErrInvalid))
	}
	c, stopServer, err := mcpServerClient(ctx, *host, *data, *backendName, log)
	if err != nil {
		return fail("mcp", err)
	}
	defer stopServer()

	if *disk == "auto" {
		*disk = ""
		if *backendName == "" || *backendName == "native" {
			*disk = "1Gi"
		}
	}
	cfg := mcptools.Config{Client: c, Backend: *backendName, Profile: *profile, Image: *image, Allow: allow, Memory: *memory, Disk: *disk,
		Timeout: *timeout, Version: version, Instance: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
	if *httpAddr == "" {
		srv := mcptools.NewServer(cfg)
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			// The client closing stdin ends the session normally.
			if !strings.Contains(err.Error(), "EOF") && !errors.Is(err, mcp.ErrConnectionClosed) {
				return fail("mcp", err)
			}
		}
		return 0
	}
	return serveMCPHTTP(ctx, *httpAddr, cfg, log)
}

// mcpServerClient connects to the server the sandboxes come from and says
// which on stderr: host (--host or $AIRLOCK_HOST), which must answer now
// (a configured server that does not is an error, never a reason to fall
// back), else a server embedded in this process.
func mcpServerClient(ctx context.Context, host, data, backendName string, log *slog.Logger) (*client.Client, func(), error) {
	if host != "" {
		c, err := client.New(host, client.WithAPIKey(os.Getenv(client.EnvAPIKey)))
		if err != nil {
			return nil, nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.Health(hctx); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("airlock serve at %s (--host or $%s) does not answer: %v: %w", host, client.EnvHost, err, sandbox.ErrUnavailable)
		}
		fmt.Fprintf(os.Stderr, "airlock mcp: sandboxes from airlock serve at %s\n", host)
		return c, func() { c.Close() }, nil
	}
	emb, err := startEmbedded(ctx, data, backendName, log)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(os.Stderr, "airlock mcp: no --host or $%s: sandboxes from a server embedded in this process (data %s); they end with it\n", client.EnvHost, emb.data)
	return emb.client, func() { emb.client.Close(); emb.stop() }, nil
}

// serveMCPHTTP serves the tools over streamable HTTP at addr/mcp until ctx
// ends. Beyond loopback it requires $AIRLOCK_MCP_TOKEN (fail closed); with
// the token set, every request must carry it.
func serveMCPHTTP(ctx context.Context, addr string, cfg mcptools.Config, log *slog.Logger) int {
	token := os.Getenv(envMCPToken)
	hostPart, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fail("mcp", fmt.Errorf("--http %q: want HOST:PORT: %w", addr, sandbox.ErrInvalid))
	}
	if ip := net.ParseIP(hostPart); token == "" && hostPart != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fail("mcp", fmt.Errorf("--http %q: listening beyond loopback needs a token in $%s (anyone who reaches it could run code): %w", addr, envMCPToken, sandbox.ErrInvalid))
	}
	srv := mcptools.NewServer(cfg)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Logger: log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(token, h))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail("mcp", fmt.Errorf("listen on %q: %w", addr, err))
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	fmt.Fprintf(os.Stderr, "airlock mcp: serving MCP at http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail("mcp", err)
	}
	return 0
}

func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "airlock mcp: a bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// embedded is an `airlock serve` inside this process, on a private socket.
type embedded struct {
	*booted // nil until started
	client  *client.Client
	dir     string // removed at stop when we made it
	cleanup bool
	lock    *os.File // the data directory's lock, held while it runs
}

// startEmbedded starts a server like `airlock serve` with every available
// backend (or the named one), listening on a socket in a private directory.
func startEmbedded(ctx context.Context, data, backendName string, log *slog.Logger) (*embedded, error) {
	e := &embedded{}
	dir, err := os.MkdirTemp("", "airlock-mcp-")
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	e.dir = dir
	if data == "" {
		data, e.cleanup = filepath.Join(dir, "data"), true
	}
	// Like serve: a server already running on --data is left alone.
	if e.lock, err = lockServeData(data, "mcp"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	var names []string
	if backendName != "" {
		names = []string{backendName}
	}
	ids := defaultHostIDs() // the embedded server is a server too
	if ids == "none" {
		ids = ""
	}
	bs, def, err := openBackends(names, backendName, data, ids, nil, log)
	if err != nil {
		e.lock.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	if err := searchableRunDir(runDirFor(data)); err != nil {
		e.lock.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	e.booted, err = bootServer(ctx, server.Config{Backends: bs, DefaultBackend: def,
		Policies: admission.HostPolicies{}, DataDir: data, RunDir: runDirFor(data), DiskQuota: autoDiskQuota(),
		Log: log, DefaultTimeout: 30 * time.Minute})
	if err != nil {
		e.lock.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	sock := filepath.Join(dir, "airlock.sock")
	ln, err := listenUnix(sock, "")
	if err != nil {
		e.stop()
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	go e.srv.Serve(ln, true)
	if e.client, err = client.New("unix://" + sock); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// stop destroys every sandbox of the embedded server and removes its files.
func (e *embedded) stop() {
	if e.booted != nil {
		e.booted.stop()
	}
	e.lock.Close() // after the server's state is left as it should be
	if e.cleanup {
		os.RemoveAll(e.dir)
	} else {
		os.Remove(filepath.Join(e.dir, "airlock.sock"))
		os.Remove(e.dir)
	}
}
