package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/airlock-dev/airlock/sandbox"
)

// Config configures the backend. The zero value works: assets and the
// compilation cache are looked up at their documented defaults.
type Config struct {
	// AssetDir holds the interpreter builds fetched by `make wasm-assets`
	// (ruby.wasm, ...). Empty: $AIRLOCK_WASM_DIR, else var/wasm beside the
	// binary's parent directory (bin/airlock -> var/wasm, the repo layout),
	// else $XDG_DATA_HOME/airlock/wasm (~/.local/share/airlock/wasm).
	AssetDir string
	// CacheDir holds wazero's compiled code so a module is compiled once per
	// machine, not once per process. Empty: $AIRLOCK_WASM_CACHE, else
	// os.UserCacheDir()/airlock/wasm; "off" keeps the cache in memory only.
	CacheDir string
	// Commands registers extra names for Exec: name -> host path of a WASI
	// command module (.wasm). Built-in names (ruby) come from AssetDir.
	Commands map[string]string
	// TempDir is where private sandbox directories (/tmp, tmpfs paths, the
	// workspace when the policy has none, the mount-point skeleton at /)
	// are made. Empty: /dev/shm when it is a writable directory (memory,
	// like the tmpfs the other backends mount; directory operations there
	// are ~50x cheaper than on a journaled disk), else os.TempDir().
	TempDir string
	// Log is the component logger; nil discards.
	Log *slog.Logger
}

// Backend runs WASI modules in wazero. It is safe for concurrent use; one
// runtime and one compilation cache are shared by all its sandboxes, each
// module instance gets its own memory, files and limits.
type Backend struct {
	cfg Config
	log *slog.Logger

	initOnce sync.Once
	initErr  error
	rt       wazero.Runtime
	cache    wazero.CompilationCache
	cacheDir string // "" when the cache is in memory only

	mu        sync.Mutex
	modules   map[string]*program // by sha256 of the module bytes
	files     map[fileKey]string  // host file identity -> sha256
	compiles  map[string]*compileCall
	stubs     map[string]bool // host stub modules instantiated
	sandboxes map[string]bool // live sandbox IDs of this backend
	compiled  atomic.Int64    // compilations done (cache misses in memory)

	tempOnce sync.Once
	tempBase string
}

// New returns a wasm backend. Nothing is opened until the first Create.
func New(cfg Config) *Backend {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Backend{
		cfg:       cfg,
		log:       log.With("backend", "wasm"),
		modules:   map[string]*program{},
		files:     map[fileKey]string{},
		compiles:  map[string]*compileCall{},
		stubs:     map[string]bool{},
		sandboxes: map[string]bool{},
	}
}

var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "wasm" }

// Probe implements sandbox.Backend. wazero needs nothing from the host, so
// the backend is always available; the details say which interpreters are
// installed.
func (b *Backend) Probe(ctx context.Context) sandbox.Probe {
	p := sandbox.Probe{Available: true, Isolation: "wasm", Details: map[string]string{}}
	dir, src := b.assetDir()
	p.Details["asset_dir"] = dir + " (" + src + ")"
	for _, a := range builtinAssets {
		if _, err := os.Stat(filepath.Join(dir, a.file)); err == nil {
			p.Details[a.name] = "installed"
		} else {
			p.Details[a.name] = "missing: run `make wasm-assets` (or scripts/wasm-assets.sh)"
		}
	}
	cache, _ := b.cachePath()
	if cache == "" {
		cache = "in memory"
	}
	p.Details["compilation_cache"] = cache
	p.Details["engine"] = engineName()
	p.Details["private_dirs"] = b.tempDir()
	p.Details["network"] = "none: WASI preview 1 without sockets, whatever the policy allows"
	return p
}

// engineName says whether wazero compiles to machine code here.
func engineName() string {
	if compilerSupported() {
		return "wazero compiler"
	}
	return "wazero interpreter"
}

// init opens the runtime once: the compilation cache, WASI.
func (b *Backend) init(ctx context.Context) error {
	b.initOnce.Do(func() {
		dir, err := b.cachePath()
		if err != nil {
			b.initErr = err
			return
		}
		var cache wazero.CompilationCache
		if dir != "" {
			cache, err = wazero.NewCompilationCacheWithDir(dir)
			if err != nil {
				b.log.Warn("compilation cache on disk unavailable, keeping it in memory", "dir", dir, "err", err)
				cache, dir = wazero.NewCompilationCache(), ""
			}
		} else {
			cache = wazero.NewCompilationCache()
		}
		b.cache, b.cacheDir = cache, dir
		rc := wazero.NewRuntimeConfig().
			WithCompilationCache(cache).
			WithCloseOnContextDone(true)
		b.rt = wazero.NewRuntimeWithConfig(context.WithoutCancel(ctx), rc)
		if _, err := wasi_snapshot_preview1.Instantiate(context.WithoutCancel(ctx), b.rt); err != nil {
			b.initErr = fmt.Errorf("wasm: instantiate wasi: %w: %w", err, sandbox.ErrUnavailable)
		}
	})
	return b.initErr
}

// Close releases the runtime and compiled modules. Sandboxes must have been
// destroyed first.
func (b *Backend) Close(ctx context.Context) error {
	b.init(ctx) // make sure initOnce cannot run after Close
	if b.rt != nil {
		return b.rt.Close(ctx)
	}
	return nil
}

func (b *Backend) cachePath() (string, error) {
	dir := b.cfg.CacheDir
	if dir == "" {
		dir = os.Getenv("AIRLOCK_WASM_CACHE")
	}
	if dir == "off" {
		return "", nil
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", nil // no home: in-memory cache
		}
		dir = filepath.Join(base, "airlock", "wasm")
	}
	return dir, nil
}

// tempPrefix names private sandbox directories so Cleanup can find them.
const tempPrefix = "airlock-wasm-"

// Cleanup implements sandbox.Backend: it removes private directories of
// sandboxes not in keep whose process has ended (a crashed server or CLI).
// Directories of a live process are never touched, whatever keep says:
// another airlock process may own them. Running modules live in their
// process, so nothing else can be left behind.
func (b *Backend) Cleanup(ctx context.Context, keep map[string]bool) error {
	dir := b.tempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wasm cleanup: read %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, tempPrefix) {
			continue
		}
		id, pid, ok := parseTempName(name)
		if !ok || keep[id] || (pid == os.Getpid() && b.live(id)) || (pid != os.Getpid() && processAlive(pid)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		} else {
			b.log.Info("removed leftover sandbox directory", "dir", name, "sandbox", id)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("wasm cleanup: %w", errors.Join(errs...))
	}
	return nil
}

// tempDir is where private directories go (see Config.TempDir).
func (b *Backend) tempDir() string {
	if b.cfg.TempDir != "" {
		return b.cfg.TempDir
	}
	b.tempOnce.Do(func() {
		b.tempBase = os.TempDir()
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			if d, err := os.MkdirTemp("/dev/shm", tempPrefix+"probe"); err == nil {
				os.Remove(d)
				b.tempBase = "/dev/shm"
			}
		}
	})
	return b.tempBase
}

// live reports whether this backend has a sandbox id that is not destroyed.
func (b *Backend) live(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sandboxes[id]
}

// tempPattern is the os.MkdirTemp pattern of a sandbox's private
// directories: prefix, sandbox ID, owning PID, random suffix.
func tempPattern(id string) string {
	return tempPrefix + id + "." + strconv.Itoa(os.Getpid()) + ".*"
}

// parseTempName parses a name made from tempPattern.
func parseTempName(name string) (id string, pid int, ok bool) {
	rest := strings.TrimPrefix(name, tempPrefix)
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", 0, false
	}
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '.')
	if j <= 0 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(rest[j+1:])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return rest[:j], pid, true
}
