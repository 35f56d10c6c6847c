package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server"
	"github.com/airlock-dev/airlock/server/admission"
)

// serveFlags are the flags of `airlock serve`, as given.
type serveFlags struct {
	socket, socketGroup, listen, tlsCert, tlsKey string
	data, imageDir, imageStore                   string
	backends, pools, allowCIDR, templatePools    stringList
	poolDemand, poolMax, poolTenantMax           int
	defBackend                                   string
	defTimeout, maxTimeout, idle, retention      time.Duration
	pausedRetention, scanTimeout, uploadTimeout  time.Duration
	maxSandboxes, eventRate, perPrefix, maxConns int
	perTenantConns, tenantRequests               int
	headTimeout                                  time.Duration
	maxMemory, maxUpload, procBuffer, logLevel   string
	maxDisk                                      string
	hostIDs, diskQuota, wasmMem, minFree         string
	publicMetrics                                bool
	ceilFile, netModes                           string
	volQuota, previewDomain                      string
	maxCheckpoints                               int
	checkpointBytes                              string
	e2bListen, e2bDomain, e2bTLSCert, e2bTLSKey  string
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.socket, "socket", client.DefaultSocket(), "unix socket to listen on (mode 0660)")
	fs.StringVar(&f.socketGroup, "socket-group", "", "group owning the socket (like docker.sock's)")
	fs.StringVar(&f.listen, "listen", "", "also listen on this TCP address; every request there needs an API key")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate for --listen")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key for --listen")
	fs.StringVar(&f.data, "data", defaultDataDir(), "data directory (SQLite store, workspaces)")
	fs.StringVar(&f.imageDir, "images", "", "removed: images come from the image store (--image-store)")
	fs.StringVar(&f.imageStore, "image-store", "", "the image store requests name images from (default: DATA/images)")
	fs.Var(&f.backends, "backend", "backend to offer (repeatable; default: every available one)")
	fs.StringVar(&f.defBackend, "default-backend", "", "backend for requests that name none (default: native, else the first)")
	fs.Var(&f.pools, "pool", "warm pool BACKEND/PROFILE=N (repeatable), e.g. native/default=4")
	fs.Var(&f.templatePools, "pool-template", "warm pool of an image (an E2B template) NAME=N for creates that name it with only a network policy, as E2B's door does (repeatable), e.g. base=4")
	fs.IntVar(&f.poolDemand, "pool-demand", 2, "warm sandboxes kept for a kind of image create (image, backend, profile, policy but the network) after its first create (0: none)")
	fs.IntVar(&f.poolMax, "pool-max", 8, "warm sandboxes all --pool-demand pools hold together")
	fs.IntVar(&f.poolTenantMax, "pool-tenant-max", 4, "warm sandboxes the --pool-demand pools one tenant's creates started hold together")
	fs.DurationVar(&f.defTimeout, "default-timeout", 10*time.Minute, "sandbox lifetime when a request gives none")
	fs.DurationVar(&f.maxTimeout, "max-timeout", 24*time.Hour, "longest lifetime a request may ask")
	fs.DurationVar(&f.idle, "idle-timeout", 0, "destroy sandboxes unused through the API this long (0: never)")
	fs.IntVar(&f.maxSandboxes, "max-sandboxes", 0, "default per-tenant limit of concurrent sandboxes (0: none)")
	fs.StringVar(&f.maxMemory, "max-memory", "", "default per-tenant limit of total sandbox memory, e.g. 16Gi")
	fs.StringVar(&f.maxDisk, "max-disk", "", "default per-tenant limit of disk: sandboxes' limits.disk (paused ones too), named volumes and snapshots together, e.g. 64Gi (needs --disk-quota volume)")
	fs.DurationVar(&f.retention, "retention", 7*24*time.Hour, "how long stopped sandboxes and their events stay in the store (0: forever)")
	fs.DurationVar(&f.pausedRetention, "paused-retention", server.DefaultPausedRetention, "how long a sandbox stays paused before it is destroyed with its files (paused sandboxes count against their tenant's quotas meanwhile; negative: forever)")
	fs.DurationVar(&f.scanTimeout, "scan-timeout", 5*time.Minute, "longest read of a sandbox's files for a checkpoint, pause, resume or rollback (files are read by their data, sparse holes skipped)")
	fs.DurationVar(&f.uploadTimeout, "upload-timeout", 10*time.Minute, "longest an archive upload's body may take, however slowly it comes")
	fs.StringVar(&f.maxUpload, "max-upload", "1Gi", "largest file, archive or stdin upload")
	fs.StringVar(&f.procBuffer, "process-buffer", "1Mi", "output kept per background process")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.hostIDs, "host-ids", defaultHostIDs(), "host uid/gid ranges for sandboxes (ids 0..65535 inside map onto a range of their own, never a host user): auto (airlock's reserved range), user:NAME (NAME's /etc/subuid and /etc/subgid), or none (only without root)")
	fs.StringVar(&f.diskQuota, "disk-quota", "auto", "how a sandbox's disk (workspace, writable layers) is bounded to its limits.disk: volume (an ext4 image per sandbox, needs root and mkfs.ext4), none, or auto (volume where it works)")
	fs.StringVar(&f.wasmMem, "wasm-memory", "4Gi", "memory all wasm sandboxes may use together (it is the server process's own)")
	fs.StringVar(&f.minFree, "min-free", "256Mi", "free space the data directory's filesystem keeps: below it new work is refused with 507 (0: never)")
	fs.IntVar(&f.eventRate, "event-rate", 200, "audit events one sandbox may store per second; beyond, one aggregate per second says how many more")
	fs.BoolVar(&f.publicMetrics, "public-metrics", false, "serve /metrics over TCP too (else the unix socket only)")
	fs.IntVar(&f.perPrefix, "max-conns-per-prefix", server.DefaultTCPLimits.PerPrefix, "TCP connections one client network (its /24 for IPv4, /64 for IPv6) may hold (0: none, e.g. behind a reverse proxy)")
	fs.IntVar(&f.perPrefix, "max-conns-per-client", server.DefaultTCPLimits.PerPrefix, "old name of --max-conns-per-prefix")
	fs.IntVar(&f.perTenantConns, "max-conns-per-tenant", server.DefaultTCPLimits.PerTenant, "TCP connections one tenant's requests may hold (0: none)")
	fs.IntVar(&f.tenantRequests, "max-requests-per-tenant", server.DefaultTenantRequests, "requests one keyed tenant may have running at once, HTTP/2 streams included; beyond, 429 (-1: none)")
	fs.IntVar(&f.maxConns, "max-conns", server.DefaultTCPLimits.Total, "TCP connections the server holds at most; at the limit a new one replaces the oldest not yet authenticated")
	fs.DurationVar(&f.headTimeout, "head-timeout", server.DefaultHeadTimeout, "longest a client may take to send a request's head (request line and headers)")
	fs.StringVar(&f.ceilFile, "ceilings", "", "server policy file: per-tenant ceilings on network rules, limits, backends, images, profiles and host paths (see docs/serve.md)")
	fs.Var(&f.allowCIDR, "tenant-allow-cidr", "guarded range (private, loopback, metadata, this host) every keyed tenant may name in network.allow (repeatable; adds to the ceilings file's default)")
	fs.StringVar(&f.netModes, "tenant-network-modes", "", "network modes keyed tenants may ask, comma-separated (default: the ceilings file's, else none,allowlist,open)")
	fs.IntVar(&f.maxCheckpoints, "max-checkpoints", 64, "checkpoints each tenant may keep")
	fs.StringVar(&f.checkpointBytes, "checkpoint-bytes", "16Gi", "bytes of workspace each tenant's checkpoints may record together")
	fs.StringVar(&f.volQuota, "volume-quota", "16Gi", "sizes of one tenant's named volumes together")
	backend.RegisterFlags(fs) // the backends' own (--kube-* in the airlock-kube build)
	fs.StringVar(&f.e2bListen, "e2b-listen", "", "also serve E2B's API (control, envd, ports) on this TCP address for E2B's SDKs (E2B_API_URL, E2B_SANDBOX_URL; keys required)")
	fs.StringVar(&f.e2bDomain, "e2b-domain", "", "sandbox domain E2B's SDKs get (DOMAIN[:PORT]): hosts api.DOMAIN and PORT-ID.DOMAIN are routed by the E2B listener")
	fs.StringVar(&f.e2bTLSCert, "e2b-tls-cert", "", "TLS certificate for --e2b-listen (e.g. for *.DOMAIN and api.DOMAIN)")
	fs.StringVar(&f.e2bTLSKey, "e2b-tls-key", "", "TLS key for --e2b-listen")
	fs.StringVar(&f.previewDomain, "preview-domain", "", "route requests for host PORT-ID.DOMAIN to that port of sandbox ID (apps that must be at /; point *.DOMAIN at this server)")
}

// parseServeFlags parses the arguments of `airlock serve`; on false the
// caller exits with code.
func parseServeFlags(args []string) (f *serveFlags, code int, ok bool) {
	f = &serveFlags{}
	fs := flag.NewFlagSet("airlock serve", flag.ContinueOnError)
	f.register(fs)
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "\nsubcommands: airlock serve key create|list|revoke, airlock serve quota set|get")
			return nil, 0, false
		}
		return nil, exitAirlock, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "airlock serve: unexpected argument %q\n", fs.Arg(0))
		return nil, exitAirlock, false
	}
	return f, 0, true
}

// logger is the server's logger at --log-level.
func (f *serveFlags) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", f.logLevel, sandbox.ErrInvalid)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), nil
}

// config checks the flags that need no host state and turns them into the
// server's settings (everything but what serve opens: backends, store,
// images, run directory). It also settles --disk-quota auto, --image-store
// and --host-ids none in f.
func (f *serveFlags) config(log *slog.Logger) (server.Config, error) {
	cfg := server.Config{
		DataDir: f.data, Log: log, Policies: admission.HostPolicies{},
		DefaultTimeout: f.defTimeout, MaxTimeout: f.maxTimeout, IdleTimeout: f.idle,
		EventRate: f.eventRate, PublicMetrics: f.publicMetrics, Retention: f.retention, PausedRetention: f.pausedRetention,
		ScanTimeout: f.scanTimeout, UploadTimeout: f.uploadTimeout,
		TCPLimits:      server.ConnLimits{PerPrefix: f.perPrefix, PerTenant: f.perTenantConns, Total: f.maxConns},
		TenantRequests: f.tenantRequests,
		HeadTimeout:    f.headTimeout,
		PreviewDomain:  f.previewDomain, PreviewScheme: previewScheme(f.tlsCert),
	}
	if err := f.sizes(&cfg); err != nil {
		return cfg, err
	}
	var err error
	if cfg.VolumeQuota, err = volumeQuotaFlag(f.volQuota); err != nil {
		return cfg, err
	}
	if err := f.settleDiskQuota(log); err != nil {
		return cfg, err
	}
	cfg.DiskQuota = f.diskQuota
	if cfg.DefaultQuota.MaxDisk > 0 && cfg.DiskQuota != server.DiskQuotaVolume {
		return cfg, fmt.Errorf("--max-disk needs --disk-quota volume (a sandbox's disk is bounded only on a volume of its own): %w", sandbox.ErrInvalid)
	}
	if f.eventRate <= 0 || f.maxConns <= 0 || f.headTimeout <= 0 {
		return cfg, fmt.Errorf("--event-rate, --max-conns and --head-timeout must be positive: %w", sandbox.ErrInvalid)
	}
	if f.perPrefix < 0 || f.perTenantConns < 0 {
		return cfg, fmt.Errorf("--max-conns-per-prefix and --max-conns-per-tenant cannot be negative (0: no limit): %w", sandbox.ErrInvalid)
	}
	if cfg.Ceilings, err = serveCeilings(f.ceilFile, f.allowCIDR, f.netModes); err != nil {
		return cfg, err
	}
	if err := f.poolConfig(&cfg); err != nil {
		return cfg, err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cfg, fmt.Errorf("--tls-cert and --tls-key go together: %w", sandbox.ErrInvalid)
	}
	if f.imageDir != "" {
		return cfg, fmt.Errorf("--images %s: a directory of root filesystems is no longer how a server gets images: they live in its image store (--image-store, default %s); add each with `AIRLOCK_IMAGE_STORE=%s airlock image import` (a docker save tarball or an OCI layout) or pull them (airlock image pull, POST /v1/images/pull): %w",
			f.imageDir, filepath.Join(f.data, "images"), filepath.Join(f.data, "images"), sandbox.ErrInvalid)
	}
	if f.imageStore == "" {
		f.imageStore = filepath.Join(f.data, "images")
	}
	if f.hostIDs == "none" {
		if os.Geteuid() == 0 {
			return cfg, fmt.Errorf("--host-ids none: a root server would run tenant code as host root; use auto or user:NAME: %w", sandbox.ErrInvalid)
		}
		f.hostIDs = ""
	}
	return cfg, nil
}

// sizes parses the byte-size flags into cfg.
func (f *serveFlags) sizes(cfg *server.Config) error {
	cfg.DefaultQuota.MaxSandboxes = f.maxSandboxes
	if f.maxMemory != "" {
		b, err := policy.ParseByteSize(f.maxMemory)
		if err != nil {
			return fmt.Errorf("--max-memory: %w", err)
		}
		cfg.DefaultQuota.MaxMemory = int64(b)
	}
	if f.maxDisk != "" {
		b, err := policy.ParseByteSize(f.maxDisk)
		if err != nil || b < 0 {
			return fmt.Errorf("--max-disk %q: want a size such as 64Gi: %w", f.maxDisk, sandbox.ErrInvalid)
		}
		cfg.DefaultQuota.MaxDisk = int64(b)
	}
	upload, err := policy.ParseByteSize(f.maxUpload)
	if err != nil || upload <= 0 {
		return fmt.Errorf("--max-upload %q: want a size such as 1Gi: %w", f.maxUpload, sandbox.ErrInvalid)
	}
	pbuf, err := policy.ParseByteSize(f.procBuffer)
	if err != nil || pbuf <= 0 || pbuf > 1<<30 {
		return fmt.Errorf("--process-buffer %q: want a size such as 1Mi: %w", f.procBuffer, sandbox.ErrInvalid)
	}
	wasmBytes, err := policy.ParseByteSize(f.wasmMem)
	if err != nil || wasmBytes <= 0 {
		return fmt.Errorf("--wasm-memory %q: want a size such as 4Gi: %w", f.wasmMem, sandbox.ErrInvalid)
	}
	free, err := policy.ParseByteSize(f.minFree)
	if err != nil || free < 0 {
		return fmt.Errorf("--min-free %q: want a size such as 256Mi: %w", f.minFree, sandbox.ErrInvalid)
	}
	if free == 0 {
		free = -1
	}
	cfg.MaxUpload, cfg.ProcessBuffer = int64(upload), int(pbuf)
	cfg.WasmMemory, cfg.MinFree = int64(wasmBytes), int64(free)
	cpBytes, err := policy.ParseByteSize(f.checkpointBytes)
	if err != nil || cpBytes <= 0 || f.maxCheckpoints <= 0 {
		return fmt.Errorf("--checkpoint-bytes %q, --max-checkpoints %d: want a size such as 16Gi and a positive count: %w", f.checkpointBytes, f.maxCheckpoints, sandbox.ErrInvalid)
	}
	cfg.CheckpointQuota = server.CheckpointQuota{Count: f.maxCheckpoints, Bytes: int64(cpBytes)}
	return nil
}

// settleDiskQuota turns --disk-quota auto into volume or none, and checks
// that volume works where it is asked.
func (f *serveFlags) settleDiskQuota(log *slog.Logger) error {
	switch f.diskQuota {
	case "auto":
		f.diskQuota = server.DiskQuotaVolume
		if why := volume.Available(); why != "" {
			log.Warn("no disk quota on sandbox workspaces", "reason", why)
			f.diskQuota = server.DiskQuotaNone
		}
	case server.DiskQuotaVolume:
		if why := volume.Available(); why != "" {
			return fmt.Errorf("--disk-quota volume: %s: %w", why, sandbox.ErrUnavailable)
		}
	case server.DiskQuotaNone:
	default:
		return fmt.Errorf("--disk-quota %q: want auto, volume or none: %w", f.diskQuota, sandbox.ErrInvalid)
	}
	return nil
}

// poolConfig sets the warm pools: --pool, --pool-template, --pool-demand.
func (f *serveFlags) poolConfig(cfg *server.Config) error {
	var err error
	if cfg.Pools, err = parsePools(f.pools); err != nil {
		return err
	}
	for _, t := range f.templatePools {
		name, n, ok := strings.Cut(t, "=")
		size, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || size < 0 || size > 1000 {
			return fmt.Errorf("--pool-template %q: want NAME=N (N from 0 to 1000): %w", t, sandbox.ErrInvalid)
		}
		cfg.Pools = append(cfg.Pools, server.PoolConfig{Image: name, Size: size}) // on the default backend
	}
	if f.poolDemand < 0 || f.poolMax < 0 || f.poolTenantMax < 0 {
		return fmt.Errorf("--pool-demand, --pool-max and --pool-tenant-max must not be negative: %w", sandbox.ErrInvalid)
	}
	cfg.PoolDemand, cfg.PoolMax, cfg.PoolTenantMax = f.poolDemand, f.poolMax, f.poolTenantMax
	return nil
}
