package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
	"github.com/airlock-dev/airlock/server/token"
)

// Policies turns create requests into resolved policies. The server calls
// ParseRaw on an inline policy (JSON, which is YAML), checks what an API
// caller may ask for, then Resolve.
type Policies interface {
	// ParseRaw strictly parses an inline policy without layering it on a profile.
	ParseRaw(data []byte) (*policy.Policy, error)
	// Resolve layers raw (may be nil) on profile ("" = default), sets the
	// workspace and rootfs, and validates. Errors wrap sandbox.ErrInvalid.
	Resolve(raw *policy.Policy, profile, workspace, rootfs string) (*policy.Policy, error)
}

// PoolConfig asks for Size ready sandboxes of (Backend, Profile), of
// Image (a store image's name: a template) when set.
type PoolConfig struct {
	Backend string
	Profile string
	Image   string
	Size    int
}

// Config configures a Server.
type Config struct {
	// Backends by name. Required.
	Backends map[string]sandbox.Backend
	// DefaultBackend is used when a request names none ("native").
	DefaultBackend string
	Store          *store.Store
	Policies       Policies
	// DataDir holds the store, volume images and, without volumes,
	// per-sandbox workspaces (DataDir/workspaces/ID).
	DataDir string
	// RunDir holds the volumes' mount points (RunDir/volumes/ID): a
	// directory on a path every host id can search (default: DataDir).
	RunDir string
	// Images is the image store requests name images from ("image" of a
	// create request; /v1/images). Nil: the server offers no images.
	Images *images.Store
	Log    *slog.Logger
	// EgressConfig, when set, adjusts each sandbox's egress proxy config
	// (tests plug a resolver or dialer in here).
	EgressConfig func(*egress.Config)
	// CABundle is the host's CA bundle, given to sandboxes with the egress
	// CA appended; nil: egress.SystemBundle().
	CABundle []byte

	DefaultTimeout time.Duration // lifetime when a request gives none (10m)
	MaxTimeout     time.Duration // longest lifetime a request may ask (24h)
	IdleTimeout    time.Duration // destroy after this long without API use (0: never)
	ReapInterval   time.Duration // how often expiry/idle are checked (1s)
	CreateTimeout  time.Duration // bound on one backend Create (60s)
	// Retention is how long stopped sandboxes and their events stay in the
	// store (0: forever).
	Retention time.Duration
	// PausedRetention is how long a sandbox stays paused before it is
	// destroyed, its files removed (0: 7 days; <0: forever).
	PausedRetention time.Duration
	DefaultQuota    store.Quota // per tenant when the store has none; zero fields: unlimited
	Pools           []PoolConfig
	// PoolDemand is the size of the image pool a create of an image (a
	// template) starts for its kind of create when none exists (0: none).
	// PoolMax bounds the sandboxes of all such pools, PoolTenantMax those
	// one tenant's creates started; PoolIdle retires a pool not taken from
	// for that long (10 min). See imagepool.go.
	PoolDemand, PoolMax, PoolTenantMax int
	PoolIdle                           time.Duration
	// applyNetwork sets a pooled sandbox's network at hand-out (setNetwork;
	// a test makes it fail to see the sandbox destroyed, not handed out).
	applyNetwork func(*live, policy.Network) error
	// ProcessBuffer bounds the output kept per background process (1 MiB).
	ProcessBuffer int
	// MaxUpload bounds a file or archive upload (1 GiB).
	MaxUpload int64
	// UploadTimeout bounds the whole of an archive upload's body, however
	// slowly it comes (0: 10m; IOTimeout bounds each wait within it).
	UploadTimeout time.Duration
	// DiskQuota is how a sandbox's disk is bounded: DiskQuotaVolume (an
	// image of limits.disk bytes per sandbox; needs root) or
	// DiskQuotaNone ("" means none).
	DiskQuota string
	// WasmMemory bounds the memory limits of all wasm sandboxes
	// together: their memory is the server process's (0: 4 GiB).
	WasmMemory int64
	// MaxExtract bounds what one archive upload extracts, sparse entries
	// counted by their size (0: MaxUpload).
	MaxExtract int64
	// MaxOutput bounds buffered exec output per stream (16 MiB).
	MaxOutput int
	// ExecTimeout is the default wall time of an exec without one (0: the policy's).
	ExecTimeout time.Duration
	// Ceilings bound what keyed tenants may ask for (nil: DefaultCeiling
	// for every tenant).
	Ceilings *admission.Ceilings
	// IOTimeout bounds each wait for a client's next request-body bytes
	// and for it to take the next response bytes (0: 30s).
	IOTimeout time.Duration
	// HeadTimeout bounds reading a request's head (0: DefaultHeadTimeout).
	HeadTimeout time.Duration
	// PublicMetrics serves /metrics over TCP too (else the unix socket only).
	PublicMetrics bool
	// MinFree is the free space the data directory's filesystem keeps:
	// below it new work is refused with 507 (0: 256 MiB; <0: never).
	MinFree int64
	// EventRate bounds the audit events one sandbox may add per second
	// (beyond, they are counted and aggregated; 0: 200).
	EventRate int
	// TCPLimits and UnixLimits bound the connections of TCP and unix
	// listeners (zero: DefaultTCPLimits, DefaultUnixLimits).
	TCPLimits, UnixLimits ConnLimits
	// TenantRequests is the most requests one keyed tenant may have
	// running at once on every listener together; beyond, 429 (0:
	// DefaultTenantRequests; <0: none). The local tenant of the trusted
	// socket has none.
	TenantRequests int
	// PreviewDomain, when set, routes requests for host PORT-ID.DOMAIN to
	// that port of sandbox ID (apps that need to be at /); PreviewScheme
	// is the scheme of the preview URLs the server hands out ("http").
	PreviewDomain, PreviewScheme string
	// VolumeQuota bounds the sizes of one tenant's named volumes together
	// (0: 16 GiB).
	VolumeQuota int64

	// ScanTimeout bounds one read of a sandbox's files: a checkpoint's, a
	// pause's manifest, a resume's or a rollback's check (0: 5m).
	ScanTimeout time.Duration

	// CheckpointQuota bounds each tenant's checkpoints: their count and
	// the bytes of the workspaces they record (zero: 64 and 16 GiB).
	CheckpointQuota CheckpointQuota
}

// DefaultPausedRetention is how long a sandbox stays paused when the
// operator sets no retention: a week, long enough for a weekend, short
// enough that abandoned files do not pile up.
const DefaultPausedRetention = 7 * 24 * time.Hour

// Server serves the /v1 API. Create with New, then Serve listeners, then
// Shutdown.
type Server struct {
	cfg     Config
	store   *store.Store
	log     *slog.Logger
	metrics *serverMetrics
	events  *eventWriter
	handler http.Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	live  map[string]*live
	usage map[string]*usage
	// wasmMemory is the memory limits of live wasm sandboxes together.
	wasmMemory int64
	volumes    map[*disk]struct{} // the live sandboxes' files (disk accounting)
	pools      map[poolKey]*pool
	code       codeKernels // code interpreters (code.go)
	browsers   browsers    // headless browsers (browser.go)

	httpMu  sync.Mutex
	servers []*http.Server

	keyWatch keyWatch // requests by API key, ended when it is revoked
	inflight inflight // requests each tenant has running (Config.TenantRequests)
	storage  *storageGuard

	portTokens    *token.Signer   // port and sandbox access tokens (server/token)
	portTransport *http.Transport // the port proxy's (ports.go)
	nvols         namedVolumes    // named volumes mounted for live sandboxes (volumes.go)

	resumes keyLocks     // one resume of a sandbox at a time, by ID (pause.go)
	changes changes      // sandboxes being rolled back, paused or resumed (change.go)
	scans   keyLocks     // one checkpoint scan of a tenant at a time, by tenant
	disks   keyLocks     // a tenant's disk quota checked against the store, by tenant (diskquota.go)
	snapMu  sync.RWMutex // a snapshot is not deleted while sandboxes are made of it (snapshot.go)
	held    heldImages   // images of paused sandboxes (imagepause.go)

	console  consoleSessions // the web console's sessions (console.go)
	tcpAddrs []net.Addr      // untrusted listeners' addresses (console links); under httpMu
}

type usage struct {
	count   int
	memory  int64
	disk    int64           // the live sandboxes' disk charges (diskquota.go)
	pending int64           // disk bytes reserved for copies under way (snapshots, volumes)
	paused  map[string]hold // paused sandboxes, by ID: they count too
}

// New reconciles the store with reality (no sandbox survives a server:
// every row still marked running is marked stopped and every backend's
// leftovers are removed), then starts the reaper and the warm pools.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.complete(); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.recoverState(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	s.handler = s.routes()
	s.wg.Add(2)
	go s.reapLoop()
	go s.keyLoop()
	for _, pc := range cfg.Pools {
		if err := s.startPool(pc); err != nil {
			s.Shutdown(context.Background())
			return nil, err
		}
	}
	return s, nil
}

// complete checks cfg and fills in the defaults of what it leaves zero.
func (cfg *Config) complete() error {
	if cfg.Store == nil || cfg.Policies == nil || len(cfg.Backends) == 0 || cfg.DataDir == "" {
		return fmt.Errorf("store, policies, data dir and a backend are required: %w", sandbox.ErrInvalid)
	}
	switch cfg.DiskQuota {
	case "":
		cfg.DiskQuota = DiskQuotaNone
	case DiskQuotaNone, DiskQuotaVolume:
	default:
		return fmt.Errorf("disk quota %q: want volume or none: %w", cfg.DiskQuota, sandbox.ErrInvalid)
	}
	cfg.setDefaults()
	if cfg.Ceilings == nil {
		cfg.Ceilings = &admission.Ceilings{Default: admission.DefaultCeiling()}
	}
	return cfg.Ceilings.Compile()
}

// setDefaults fills in the zero (or, for sizes, non-positive) fields that
// have a default.
func (cfg *Config) setDefaults() {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultBackend == "" {
		cfg.DefaultBackend = "native"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.DefaultTimeout, 10*time.Minute)
	def(&cfg.MaxTimeout, 24*time.Hour)
	def(&cfg.ReapInterval, time.Second)
	def(&cfg.PausedRetention, DefaultPausedRetention)
	def(&cfg.ScanTimeout, 5*time.Minute)
	def(&cfg.UploadTimeout, 10*time.Minute)
	def(&cfg.CreateTimeout, 60*time.Second)
	def(&cfg.IOTimeout, defaultIOTimeout)
	def(&cfg.PoolIdle, 10*time.Minute)
	if cfg.applyNetwork == nil {
		cfg.applyNetwork = setNetwork
	}
	if cfg.PoolMax <= 0 {
		cfg.PoolMax = 8
	}
	if cfg.PoolTenantMax <= 0 {
		cfg.PoolTenantMax = 4
	}
	def(&cfg.HeadTimeout, DefaultHeadTimeout)
	if cfg.TenantRequests == 0 {
		cfg.TenantRequests = DefaultTenantRequests
	}
	if cfg.RunDir == "" {
		cfg.RunDir = cfg.DataDir
	}
	if cfg.CABundle == nil {
		cfg.CABundle, _ = egress.SystemBundle()
	}
	if cfg.ProcessBuffer <= 0 {
		cfg.ProcessBuffer = 1 << 20
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = 1 << 30
	}
	if cfg.WasmMemory <= 0 {
		cfg.WasmMemory = 4 << 30
	}
	if cfg.MaxExtract <= 0 {
		cfg.MaxExtract = cfg.MaxUpload
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 16 << 20
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = 256 << 20
	}
	if cfg.EventRate <= 0 {
		cfg.EventRate = 200
	}
	if cfg.TCPLimits == (ConnLimits{}) {
		cfg.TCPLimits = DefaultTCPLimits
	}
	if cfg.UnixLimits == (ConnLimits{}) {
		cfg.UnixLimits = DefaultUnixLimits
	}
	if cfg.CheckpointQuota.Count <= 0 {
		cfg.CheckpointQuota.Count = 64
	}
	if cfg.CheckpointQuota.Bytes <= 0 {
		cfg.CheckpointQuota.Bytes = 16 << 30
	}
}

// newServer builds the Server of a completed cfg: its context, storage
// guard, metrics and port signer (nothing runs yet). On error it cancels
// the context it made.
func newServer(cfg Config) (*Server, error) {
	sctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, store: cfg.Store, log: cfg.Log,
		ctx: sctx, cancel: cancel,
		live: map[string]*live{}, usage: map[string]*usage{}, pools: map[poolKey]*pool{}, volumes: map[*disk]struct{}{},
	}
	if cfg.MinFree > 0 {
		s.storage = &storageGuard{dir: cfg.DataDir, min: uint64(cfg.MinFree), free: freeBytes}
	}
	m, err := newMetrics(s)
	if err != nil {
		cancel()
		return nil, err
	}
	s.metrics = m
	if s.portTokens, err = token.Load(cfg.DataDir); err != nil {
		cancel()
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.portTransport = s.newPortTransport()
	return s, nil
}

// recoverState sweeps named volumes left mounted, starts the event writer and
// reconciles the store (reconcile); on error it closes the event writer.
func (s *Server) recoverState(ctx context.Context) error {
	if err := s.sweepNamedVolumes(ctx); err != nil {
		s.log.Warn("named volumes", "err", err)
	}
	s.events = newEventWriter(s.cfg.Store, s.cfg.Log, s.metrics)
	if err := s.reconcile(ctx); err != nil {
		s.events.close()
		return err
	}
	return nil
}

// reconcile makes the store agree with reality after a restart.
func (s *Server) reconcile(ctx context.Context) error {
	crashed, err := s.store.MarkCrashedPaused(ctx, "server crashed: paused on restart", time.Now())
	if err != nil {
		return err
	}
	if len(crashed) > 0 {
		s.log.Warn("keep-alive sandboxes of a crashed server are paused", "count", len(crashed))
	}
	ids, err := s.store.MarkAllStopped(ctx, "server restarted", time.Now())
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		s.log.Warn("sandboxes did not survive the previous server; marked stopped", "count", len(ids))
	}
	names := make([]string, 0, len(s.cfg.Backends))
	for n := range s.cfg.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := s.cfg.Backends[n].Cleanup(ctx, map[string]bool{}); err != nil {
			errs = append(errs, fmt.Errorf("reconcile: clean up backend %q: %w", n, err))
		}
	}
	// Sandboxes with host ids of their own must reach their workspace
	// below the data directory: search permission only (no listing);
	// everything else in it is the server's user's alone.
	if err := os.Chmod(s.cfg.DataDir, 0o711); err != nil {
		errs = append(errs, fmt.Errorf("reconcile: data dir: %w", err))
	}
	// Spooled uploads a crash left: image imports (named while the store
	// reads them) and archives of a server before the fix of issue 11
	// (those are unlinked at once now).
	for _, pattern := range []string{"upload-*.tar", "image-*.tar"} {
		stale, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, pattern))
		for _, f := range stale {
			os.Remove(f)
		}
	}
	if err := s.sweepDisks(s.pausedFiles(ctx)); err != nil {
		errs = append(errs, err)
	}
	if err := s.keepSnapshots(ctx); err != nil {
		errs = append(errs, fmt.Errorf("reconcile: snapshots: %w", err))
	}
	return errors.Join(errs...)
}

// Handler returns the API handler; requests carry their listener's trust
// via Serve, so Handler alone treats every request as untrusted (TCP).
func (s *Server) Handler() http.Handler { return s.withTrust(false, s.handler) }

// Serve answers requests on ln until Shutdown. trusted listeners (the unix
// socket, protected by its file mode) accept requests without an API key
// as tenant "local"; untrusted ones (TCP) require a key.
func (s *Server) Serve(ln net.Listener, trusted bool) error {
	lim := s.cfg.TCPLimits
	if _, unix := ln.Addr().(*net.UnixAddr); unix {
		lim = s.cfg.UnixLimits
	}
	ln = newLimitListener(ln, lim, s.metrics)
	var addr net.Addr
	if !trusted {
		addr = ln.Addr()
	}
	return s.serveHTTP(ln, s.withTrust(trusted, s.handler), idleTimeout, addr)
}

// serveHTTP serves h on ln (already bounded by a limit listener) until
// Shutdown, with the server's deadlines: the head's, and the I/O timeout
// on each wait for a body's next bytes or for the client to take the
// next response bytes. tcpAddr, when set, is recorded as one of the
// server's TCP addresses.
func (s *Server) serveHTTP(ln net.Listener, h http.Handler, idle time.Duration, tcpAddr net.Addr) error {
	hs := &http.Server{
		Handler:           withDeadlines(s.cfg.IOTimeout, h),
		ReadHeaderTimeout: s.cfg.HeadTimeout,
		ConnContext:       withConn,
		IdleTimeout:       idle,
		MaxHeaderBytes:    64 << 10,
		Protocols:         protocols(),
		HTTP2:             h2Config(s.cfg.IOTimeout, func(typ string) { s.metrics.h2Errors.WithLabelValues(typ).Inc() }),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.httpMu.Lock()
	s.servers = append(s.servers, hs)
	if tcpAddr != nil {
		s.tcpAddrs = append(s.tcpAddrs, tcpAddr)
	}
	s.httpMu.Unlock()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests, ends streams, destroys every sandbox
// (their agents would die with the server anyway) and marks them stopped,
// then closes the event writer. The store stays open (the caller owns it).
func (s *Server) Shutdown(ctx context.Context) error {
	s.httpMu.Lock()
	servers := s.servers
	s.servers = nil
	s.httpMu.Unlock()
	for _, hs := range servers {
		// Long streams (follow, PTY) end when s.ctx is cancelled below.
		go hs.Shutdown(ctx)
	}
	// Cancelling ends streams, the reaper and pool fills; background
	// process waiters end when their sandboxes are destroyed below.
	s.cancel()
	s.mu.Lock()
	var all []*live
	for _, l := range s.live {
		all = append(all, l)
	}
	for _, p := range s.pools {
		all = append(all, p.drain()...)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.shutdownOne(l)
		}()
	}
	wg.Wait()
	s.wg.Wait()
	for _, hs := range servers {
		hs.Close()
	}
	s.events.close()
	return nil
}
