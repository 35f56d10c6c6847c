package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/e2b"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
)

func init() {
	register(command{name: "serve", short: "run the sandbox API server (and manage its API keys)", run: runServe})
}

// defaultDataDir is /var/lib/airlock as root, else under XDG_DATA_HOME.
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/airlock"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "airlock")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "airlock")
}

func runServe(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "key":
			return runServeKey(args[1:])
		case "quota":
			return runServeQuota(args[1:])
		}
	}
	if wantsMissingBackend(args) {
		return forwardToKube("serve", args)
	}
	f, lock, code, ok := lockedServeFlags(args)
	if !ok {
		return code
	}
	defer lock.Close()
	log, err := f.logger()
	if err != nil {
		return fail("serve", err)
	}
	cfg, err := f.config(log)
	if err != nil {
		return fail("serve", err)
	}
	if cfg.Images, err = images.Open(f.imageStore, images.Options{Log: log.With("component", "images")}); err != nil {
		return fail("serve", err)
	}
	cfg.RunDir = runDirFor(f.data)
	if err := searchableRunDir(cfg.RunDir); err != nil {
		return fail("serve", err)
	}
	defer os.RemoveAll(cfg.RunDir) // after Shutdown: nothing of a sandbox is left in it
	if f.hostIDs != "" && f.diskQuota == server.DiskQuotaNone {
		// Without volumes the workspaces are below the data directory.
		if err := searchableByOthers(f.data); err != nil {
			return fail("serve", err)
		}
	}
	if cfg.Backends, cfg.DefaultBackend, err = openBackends(f.backends, f.defBackend, f.data, f.hostIDs, cfg.Images, log); err != nil {
		return fail("serve", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := bootServer(ctx, cfg)
	if err != nil {
		return fail("serve", err)
	}
	errc := make(chan error, 2)
	if err := f.serveListeners(b.srv, errc, log, sortedKeys(cfg.Backends)); err != nil {
		b.srv.Shutdown(context.Background())
		b.store.Close()
		return fail("serve", err)
	}
	if err := f.serveE2B(ctx, b.srv, errc, log, cfg.RunDir); err != nil {
		b.srv.Shutdown(context.Background())
		b.store.Close()
		os.Remove(f.socket)
		return fail("serve", err)
	}
	defer os.Remove(f.socket)
	select {
	case <-ctx.Done():
		log.Info("shutting down: destroying every sandbox")
	case err = <-errc:
		log.Error("listener failed; shutting down", "err", err)
	}
	b.stop()
	if err != nil {
		return fail("serve", err)
	}
	return 0
}

// lockedServeFlags parses serve's flags and, first of all, takes the data
// directory: a server already running on it is left alone (issue 24 item
// 12).
func lockedServeFlags(args []string) (*serveFlags, *os.File, int, bool) {
	f, code, ok := parseServeFlags(args)
	if !ok {
		return nil, nil, code, false
	}
	lock, err := lockServeData(f.data, "serve")
	if err != nil {
		return nil, nil, fail("serve", err), false
	}
	return f, lock, 0, true
}

// defaultBackend is the --default-backend given, else native, else the
// first offered by name.
func defaultBackend(given string, bs map[string]sandbox.Backend) string {
	if given != "" {
		return given
	}
	if _, ok := bs["native"]; ok {
		return "native"
	}
	return sortedKeys(bs)[0]
}

// serveListeners starts serving on the unix socket and, with --listen,
// on TCP; a listener that ends sends its error on errc. On an error the
// socket is removed again and the caller shuts srv down.
func (f *serveFlags) serveListeners(srv *server.Server, errc chan<- error, log *slog.Logger, backends []string) error {
	ln, err := listenUnix(f.socket, f.socketGroup)
	if err != nil {
		return err
	}
	go func() { errc <- srv.Serve(ln, true) }()
	log.Info("listening", "socket", f.socket, "backends", strings.Join(backends, ","), "data", f.data)
	if f.listen == "" {
		return nil
	}
	tln, err := net.Listen("tcp", f.listen)
	if err != nil {
		os.Remove(f.socket)
		return fmt.Errorf("listen on %q: %w", f.listen, err)
	}
	if f.tlsCert != "" {
		cfg, err := tlsConfig(f.tlsCert, f.tlsKey)
		if err != nil {
			tln.Close()
			os.Remove(f.socket)
			return err
		}
		// HTTP/2 or HTTP/1.1 by ALPN; TLS above the connection limits.
		go func() { errc <- srv.ServeTLS(tln, cfg) }()
		log.Info("listening", "tcp", tln.Addr().String(), "tls", "h2, http/1.1", "auth", "API key required")
		return nil
	}
	log.Warn("TCP listener without TLS: API keys travel in clear text; put it behind TLS", "addr", tln.Addr().String())
	go func() { errc <- srv.Serve(tln, false) }()
	log.Info("listening", "tcp", tln.Addr().String(), "auth", "API key required")
	return nil
}

// serveCeilings loads the ceilings file (if any) and applies the flags
// to its default ceiling.
func serveCeilings(file string, allowCIDR []string, modes string) (*admission.Ceilings, error) {
	c := &admission.Ceilings{Default: admission.DefaultCeiling()}
	if file != "" {
		var err error
		if c, err = admission.LoadCeilings(file); err != nil {
			return nil, err
		}
	}
	c.Default.Network.Allow = append(c.Default.Network.Allow, allowCIDR...)
	if modes != "" {
		c.Default.Network.Modes = strings.Split(modes, ",")
	}
	return c, nil
}

func sortedKeys(m map[string]sandbox.Backend) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func parsePools(specs []string) ([]server.PoolConfig, error) {
	var out []server.PoolConfig
	for _, s := range specs {
		key, n, ok := strings.Cut(s, "=")
		be, prof, _ := strings.Cut(key, "/")
		size, err := strconv.Atoi(n)
		if !ok || be == "" || err != nil || size < 0 || size > 1000 {
			return nil, fmt.Errorf("--pool %q: want BACKEND/PROFILE=N: %w", s, sandbox.ErrInvalid)
		}
		out = append(out, server.PoolConfig{Backend: be, Profile: prof, Size: size})
	}
	return out, nil
}

// openServeBackends opens the named backends (each must work: fail closed),
// or every available one when none is named.
func openServeBackends(names []string, data, hostIDs string, imgs *images.Store, log *slog.Logger) (map[string]sandbox.Backend, error) {
	out := map[string]sandbox.Backend{}
	explicit := len(names) > 0
	if !explicit {
		names = backendNames()
	}
	for _, n := range names {
		// Each server keeps its backends' state under its own data
		// directory, so that its crash recovery (Cleanup) finds its own
		// leftovers.
		b, err := backend.Open(n, backend.Options{Log: log, StateDir: filepath.Join(runDirFor(data), "backends"), CgroupParent: cgroupParentFor(data), HostIDs: hostIDs, Images: imgs})
		if err == nil {
			if p := b.Probe(context.Background()); !p.Available {
				err = fmt.Errorf("backend %q: %s: %w", n, p.Reason, sandbox.ErrUnavailable)
			}
		}
		if err != nil {
			if explicit {
				return nil, err
			}
			log.Info("backend not offered", "backend", n, "reason", err)
			continue
		}
		out[n] = b
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no backend available on this host (see airlock doctor): %w", sandbox.ErrUnavailable)
	}
	return out, nil
}

// searchableByOthers checks that every existing parent of dir lets others
// search it: sandboxes running as host ids of their own must reach their
// workspaces below the data directory.
func searchableByOthers(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--data %q: %w", dir, err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("--data %q: %s (mode %o) is not searchable by others, so sandboxes, which run as host ids of their own, cannot reach their workspaces below it: chmod o+x it, or pick another data directory: %w", dir, p, fi.Mode().Perm(), sandbox.ErrInvalid)
		}
		if p == "/" {
			return nil
		}
	}
}

// defaultHostIDs is auto as root (a server's sandboxes never run as host
// root), else none (an unprivileged server's sandboxes are that user).
func defaultHostIDs() string {
	if os.Geteuid() == 0 {
		return "auto"
	}
	return "none"
}

// searchableRunDir makes run, its parent (airlock's own runtime
// directory, /run/airlock as root) and its backends directory searchable by
// others, search only: the sandboxes' mount points and gVisor's bundles are
// below them, and everything else in them stays 0700.
func searchableRunDir(run string) error {
	for _, d := range []string{filepath.Dir(run), run, filepath.Join(run, "backends")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("runtime directory %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("runtime directory %s: %w", d, err)
		}
	}
	return nil
}

// autoDiskQuota is volume where volumes work, else none.
func autoDiskQuota() string {
	if volume.Available() == "" {
		return server.DiskQuotaVolume
	}
	return server.DiskQuotaNone
}

// runDirFor is this server's runtime directory, named like its cgroup
// parent after the data directory: the volumes' mount points and the
// backends' state (runsc bundles, lock files) live there, on a path
// sandboxes running as host ids of their own can search.
func runDirFor(data string) string {
	base := filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Geteuid()))
	if os.Geteuid() == 0 {
		base = "/run/airlock"
	} else if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		base = filepath.Join(d, "airlock")
	}
	return filepath.Join(base, cgroupParentFor(data))
}

// cgroupParentFor names this server's cgroup parent after its data
// directory: two servers (or a server and `airlock run`) never sweep each
// other's sandboxes on crash recovery.
func cgroupParentFor(data string) string {
	abs, err := filepath.Abs(data)
	if err != nil {
		abs = data
	}
	h := sha256.Sum256([]byte(abs))
	return fmt.Sprintf("airlock-serve-%x", h[:4])
}

// listenUnix listens on path with mode 0660 (and group), replacing a stale
// socket but never a live one.
func listenUnix(path, group string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket %q: %w", path, err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("socket %q: another server is listening: %w", path, sandbox.ErrExists)
	}
	os.Remove(path)
	// No umask games: the umask is process-wide and other goroutines (the
	// warm pools) create files meanwhile. With the usual umask the socket
	// starts without write permission for others (so nobody else can
	// connect) and is narrowed to 0660 right away.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("socket %q: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %q: %w", path, err)
	}
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket group %q: %w", group, err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket %q: chown: %w", path, err)
		}
	}
	return ln, nil
}

// openExistingStore opens the store of a server's data directory for the
// key and quota commands, which must never create one: a key written to a
// store no server reads (a mistyped or forgotten --data) would look like
// it worked.
func openExistingStore(ctx context.Context, fs *flag.FlagSet, data string) (*store.Store, error) {
	if _, err := os.Stat(filepath.Join(data, store.File)); err != nil {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "data" })
		hint := "name the server's data directory with --data DIR"
		if given {
			hint = "is it the --data of `airlock serve`? (it creates the store on start)"
		}
		return nil, fmt.Errorf("no store in %q: %s: %w", data, hint, sandbox.ErrNotFound)
	}
	return store.Open(ctx, data)
}

// runServeKey manages API keys in the store: create prints the key once.
func runServeKey(args []string) int {
	const usage = "usage: airlock serve key create --tenant T [--name N] | list | revoke ID  [--data DIR]\n"
	return dispatch("serve key", usage, []subcommand{
		{[]string{"create"}, func(a []string) int { return serveKey("create", a) }},
		{[]string{"list", "ls"}, func(a []string) int { return serveKey("list", a) }},
		{[]string{"revoke"}, func(a []string) int { return serveKey("revoke", a) }},
	}, args)
}

// serveKey runs one verb of `airlock serve key` (dispatch checked it).
func serveKey(sub string, rest []string) int {
	var ids []string
	if sub == "revoke" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		// `revoke ID --data DIR`: the ID may come before the flags.
		ids, rest = rest[:1], rest[1:]
	}
	fs := flag.NewFlagSet("airlock serve key "+sub, flag.ContinueOnError)
	data := fs.String("data", defaultDataDir(), "data directory")
	tenant := fs.String("tenant", "", "tenant the key acts for")
	name := fs.String("name", "", "a note about the key")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(rest); err != nil {
		return exitAirlock
	}
	ids = append(ids, fs.Args()...)
	ctx := context.Background()
	st, err := openExistingStore(ctx, fs, *data)
	if err != nil {
		return fail("serve key", err)
	}
	defer st.Close()
	switch sub {
	case "create":
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fail("serve key", err)
		}
		key := store.KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
		id, err := st.AddKey(ctx, *tenant, *name, key)
		if err != nil {
			return fail("serve key", err)
		}
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(map[string]string{"id": id, "tenant": *tenant, "key": key, "e2b_key": e2b.Alias(key)})
		} else {
			fmt.Println(key)
			fmt.Fprintf(os.Stderr, "key %s for tenant %q (shown once; only its hash is stored; --json also gives its E2B form)\n", id, *tenant)
		}
		return 0
	case "list":
		keys, err := st.ListKeys(ctx)
		if err != nil {
			return fail("serve key", err)
		}
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(keys)
			return 0
		}
		for _, k := range keys {
			state := "active"
			if k.Revoked {
				state = "revoked"
			}
			fmt.Printf("%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, state, k.CreatedAt.Format(time.RFC3339), k.Name)
		}
		return 0
	case "revoke":
		if len(ids) != 1 {
			return fail("serve key", fmt.Errorf("revoke: want one key ID: %w", sandbox.ErrInvalid))
		}
		if err := st.RevokeKey(ctx, ids[0]); err != nil {
			return fail("serve key", err)
		}
		return 0
	}
	panic("serve key: verb " + sub + " not in dispatch's table")
}

// runServeQuota sets or shows a tenant's quota.
func runServeQuota(args []string) int {
	const usage = "usage: airlock serve quota set|get --tenant T [--max-sandboxes N] [--max-memory SIZE] [--max-disk SIZE] [--data DIR]\n"
	return dispatch("serve quota", usage, []subcommand{
		{[]string{"set"}, func(a []string) int { return serveQuota("set", a) }},
		{[]string{"get"}, func(a []string) int { return serveQuota("get", a) }},
	}, args)
}

// serveQuota runs one verb of `airlock serve quota` (dispatch checked it).
func serveQuota(sub string, args []string) int {
	fs := flag.NewFlagSet("airlock serve quota "+sub, flag.ContinueOnError)
	data := fs.String("data", defaultDataDir(), "data directory")
	tenant := fs.String("tenant", "", "tenant")
	maxSandboxes := fs.Int("max-sandboxes", 0, "concurrent sandboxes (0: server default)")
	maxMemory := fs.String("max-memory", "", "total memory, e.g. 8Gi (empty: server default)")
	maxDisk := fs.String("max-disk", "", "total disk: sandboxes' limits.disk (paused ones too), volumes and snapshots, e.g. 64Gi (empty: server default)")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return exitAirlock
	}
	if *tenant == "" {
		return fail("serve quota", fmt.Errorf("--tenant is required: %w", sandbox.ErrInvalid))
	}
	ctx := context.Background()
	st, err := openExistingStore(ctx, fs, *data)
	if err != nil {
		return fail("serve quota", err)
	}
	defer st.Close()
	switch sub {
	case "set":
		q := store.Quota{MaxSandboxes: *maxSandboxes}
		for _, sz := range []struct {
			flag, v string
			to      *int64
		}{{"--max-memory", *maxMemory, &q.MaxMemory}, {"--max-disk", *maxDisk, &q.MaxDisk}} {
			if sz.v == "" {
				continue
			}
			b, err := policy.ParseByteSize(sz.v)
			if err != nil || b < 0 {
				return fail("serve quota", fmt.Errorf("%s %q: want a size such as 8Gi: %w", sz.flag, sz.v, sandbox.ErrInvalid))
			}
			*sz.to = int64(b)
		}
		if err := st.SetQuota(ctx, *tenant, q); err != nil {
			return fail("serve quota", err)
		}
		return 0
	case "get":
		q, err := st.GetQuota(ctx, *tenant)
		if err != nil {
			return fail("serve quota", err)
		}
		json.NewEncoder(os.Stdout).Encode(q)
		return 0
	}
	panic("serve quota: verb " + sub + " not in dispatch's table")
}

// tlsConfig is a server's TLS with the certificate and key files.
func tlsConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
