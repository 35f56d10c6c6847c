package wasm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// wasmSandbox is a set of preopened directories, an environment and limits;
// each Exec instantiates a fresh module in it.
type wasmSandbox struct {
	b       *Backend
	id      string
	log     *slog.Logger
	audit   audit.Sink
	mounts  *mountTable
	private []string // host dirs made for this sandbox, removed at Destroy
	env     map[string]string
	workdir string
	pol     *policy.Policy

	ctx    context.Context // ends at Destroy
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	closed    bool
	procs     map[*process]struct{}
	destroyed sync.Once

	peak       atomic.Int64
	violations atomic.Int64
	memUsed    atomic.Int64 // linear memory of the running modules
}

// Create implements sandbox.Backend. The sandbox's filesystem is: the
// workspace read-write (a private directory at /workspace when the policy
// has none), a private /tmp and each tmpfs path, read_only paths read-only
// and read_write paths read-write at their host paths, the rootfs (if any)
// read-only at /, and nothing else.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	if spec.Policy == nil {
		return nil, fmt.Errorf("create sandbox %q: nil policy: %w", spec.ID, sandbox.ErrInvalid)
	}
	if !sandbox.ValidID(spec.ID) {
		return nil, fmt.Errorf("create sandbox %q: invalid id: %w", spec.ID, sandbox.ErrInvalid)
	}
	if err := b.init(ctx); err != nil {
		return nil, fmt.Errorf("create sandbox %q: %w", spec.ID, err)
	}
	log := spec.Log
	if log == nil {
		log = b.log
	}
	s := &wasmSandbox{
		b:      b,
		id:     spec.ID,
		log:    log.With("backend", "wasm", "sandbox", spec.ID),
		audit:  spec.Audit,
		mounts: &mountTable{},
		pol:    spec.Policy,
		done:   make(chan struct{}),
		procs:  map[*process]struct{}{},
	}
	b.mu.Lock()
	if b.sandboxes[spec.ID] {
		b.mu.Unlock()
		return nil, fmt.Errorf("create sandbox %q: %w", spec.ID, sandbox.ErrExists)
	}
	b.sandboxes[spec.ID] = true
	b.mu.Unlock()
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if err := s.buildFS(spec); err != nil {
		return nil, fmt.Errorf("create sandbox %q: %w", spec.ID, err)
	}
	s.env = map[string]string{}
	for _, kv := range sandbox.Environ(spec.Policy, os.Environ(), spec.Env) {
		k, v, _ := strings.Cut(kv, "=")
		s.env[k] = v
	}
	s.workdir = s.defaultWorkdir(spec.Policy)
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if m := spec.Policy.Network.Mode; m != "" && m != policy.NetworkNone {
		s.log.Info("network policy has no effect: wasm modules get no sockets", "mode", m)
	}
	s.log.Debug("sandbox created", "mounts", len(s.mounts.mounts), "workdir", s.workdir)
	return s, nil
}

// buildFS opens the mounts the policy grants.
func (s *wasmSandbox) buildFS(spec sandbox.Spec) error {
	fsp := spec.Policy.Filesystem
	guard := spec.Policy.ConfigGuard(spec.Policy.Process.Env["HOME"])
	for k, v := range spec.Pinned {
		guard.Pinned[k] = v
	}
	if exe, err := os.Executable(); err == nil {
		guard.Pinned[exe] = "the airlock binary"
	}
	rules := mountOpts{deny: fsp.Deny, guard: guard, report: func(d policy.Denial) {
		s.log.Info("write refused", "rule", d.Rule, "op", d.Op, "path", d.Path)
		s.emit(audit.TypeDenied, d.Op+" "+d.Path+": refused by rule "+d.Rule,
			map[string]any{"rule": d.Rule, "op": d.Op, "path": d.Path})
	}}
	if fsp.Rootfs != "" {
		o := rules
		o.readOnly = true
		if err := s.mounts.add("/", fsp.Rootfs, o); err != nil {
			return fmt.Errorf("open rootfs: %w: %w", err, sandbox.ErrInvalid)
		}
	}
	for _, p := range fsp.ReadOnly {
		if err := s.grant(p, true, rules); err != nil {
			return err
		}
	}
	for _, p := range fsp.ReadWrite {
		if err := s.grant(p, false, rules); err != nil {
			return err
		}
	}
	disk := int64(spec.Policy.Limits.DiskBytes)
	switch ws := fsp.WorkspacePath(); ws {
	case "":
		dir, err := s.privateDir("workspace")
		if err != nil {
			return err
		}
		if err := s.mounts.add("/workspace", dir, mountOpts{private: true, disk: disk}); err != nil {
			return fmt.Errorf("open workspace: %w", err)
		}
	default:
		if !filepath.IsAbs(ws) {
			return fmt.Errorf("workspace %q: not absolute (policy not resolved): %w", ws, sandbox.ErrInvalid)
		}
		if err := s.mounts.add(fsp.WorkspaceInside(), ws, rules); err != nil {
			return fmt.Errorf("open workspace: %w: %w", err, sandbox.ErrInvalid)
		}
	}
	for _, t := range append([]string{"/tmp"}, fsp.Tmpfs...) {
		dir, err := s.privateDir("tmp")
		if err != nil {
			return err
		}
		if err := s.mounts.add(t, dir, mountOpts{private: true, disk: disk}); err != nil {
			return fmt.Errorf("open private %s: %w", t, err)
		}
	}
	if err := s.injectFiles(spec.Files); err != nil {
		return err
	}
	// Without a rootfs, / is an empty read-only directory holding only the
	// way to each mount point.
	if !s.mounts.has("/") {
		dir, err := s.privateDir("root")
		if err != nil {
			return err
		}
		if err := s.mounts.add("/", dir, mountOpts{private: true, readOnly: true}); err != nil {
			return fmt.Errorf("open private /: %w", err)
		}
	}
	return s.mounts.scaffold()
}

// grant mounts one read_only/read_write path. WASI preopens are
// directories: a path that is a file, or does not exist, is not granted
// (the sandbox sees less, never more) and the omission is logged.
func (s *wasmSandbox) grant(p string, readOnly bool, o mountOpts) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("path %q: not absolute (policy not resolved): %w", p, sandbox.ErrInvalid)
	}
	st, err := os.Stat(p)
	if err != nil || !st.IsDir() {
		s.log.Warn("policy path not granted: wasm preopens are directories", "path", p, "read_only", readOnly, "err", err)
		return nil
	}
	o.readOnly = readOnly
	if err := s.mounts.add(p, p, o); err != nil {
		return fmt.Errorf("open %s: %w: %w", p, err, sandbox.ErrInvalid)
	}
	return nil
}

// privateDir makes a host directory owned by this sandbox.
func (s *wasmSandbox) privateDir(what string) (string, error) {
	dir, err := os.MkdirTemp(s.b.tempDir(), tempPattern(s.id))
	if err != nil {
		return "", fmt.Errorf("make private %s: %w: %w", what, err, sandbox.ErrUnavailable)
	}
	s.private = append(s.private, dir)
	return dir, nil
}

// injectFiles places spec.Files read-only: each parent directory becomes a
// private read-only mount holding the injected files (it hides what the
// guest would otherwise see in that directory).
func (s *wasmSandbox) injectFiles(files []sandbox.File) error {
	byDir := map[string][]sandbox.File{}
	for _, f := range files {
		p := path.Clean(f.Path)
		if !path.IsAbs(f.Path) || p == "/" {
			return fmt.Errorf("inject file %q: must be an absolute file path: %w", f.Path, sandbox.ErrInvalid)
		}
		byDir[path.Dir(p)] = append(byDir[path.Dir(p)], f)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		host, err := s.privateDir("files")
		if err != nil {
			return err
		}
		for _, f := range byDir[d] {
			mode := fs.FileMode(f.Mode) & fs.ModePerm
			if mode == 0 {
				mode = 0o444
			}
			if err := os.WriteFile(filepath.Join(host, path.Base(f.Path)), f.Data, mode); err != nil {
				return fmt.Errorf("inject file %q: %w", f.Path, err)
			}
		}
		if err := s.mounts.add(d, host, mountOpts{private: true, readOnly: true}); err != nil {
			return fmt.Errorf("inject files in %s: %w", d, err)
		}
	}
	return nil
}

func (s *wasmSandbox) defaultWorkdir(p *policy.Policy) string {
	if p.Process.Workdir != "" {
		return path.Clean(p.Process.Workdir)
	}
	switch p.Filesystem.WorkspacePath() {
	case "":
		return "/workspace"
	default:
		return filepath.ToSlash(p.Filesystem.WorkspaceInside())
	}
}

// ID implements sandbox.Sandbox.
func (s *wasmSandbox) ID() string { return s.id }

// Done implements sandbox.Sandbox.
func (s *wasmSandbox) Done() <-chan struct{} { return s.done }

// Files implements sandbox.Sandbox.
func (s *wasmSandbox) Files() sandbox.Files { return &files{s: s} }

// Stats implements sandbox.Sandbox. Memory is the linear memory of the
// running modules; CPU time is not measured (0).
func (s *wasmSandbox) Stats(ctx context.Context) (sandbox.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Stats{}, fmt.Errorf("stats %q: %w", s.id, sandbox.ErrClosed)
	}
	var st sandbox.Stats
	for range s.procs {
		st.Pids++
	}
	st.MemoryBytes = s.memUsed.Load()
	st.MemoryPeakBytes = max(s.peak.Load(), st.MemoryBytes)
	st.Violations = int(s.violations.Load())
	return st, nil
}

// Destroy implements sandbox.Sandbox: it stops every running module,
// waits for them and removes the private directories.
func (s *wasmSandbox) Destroy(ctx context.Context) error {
	var err error
	s.destroyed.Do(func() {
		s.mu.Lock()
		s.closed = true
		procs := make([]*process, 0, len(s.procs))
		for p := range s.procs {
			procs = append(procs, p)
		}
		s.mu.Unlock()
		if s.cancel != nil {
			s.cancel()
		}
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-ctx.Done():
				err = fmt.Errorf("destroy sandbox %q: %w", s.id, ctx.Err())
			}
		}
		if e := s.release(); e != nil && err == nil {
			err = fmt.Errorf("destroy sandbox %q: %w", s.id, e)
		}
		close(s.done)
	})
	return err
}

// release closes the mounts and removes private directories.
func (s *wasmSandbox) release() error {
	defer func() {
		s.b.mu.Lock()
		delete(s.b.sandboxes, s.id)
		s.b.mu.Unlock()
	}()
	s.mounts.close()
	var errs []error
	for _, d := range s.private {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	s.private = nil
	return errors.Join(errs...)
}
