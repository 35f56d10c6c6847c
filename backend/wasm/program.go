package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/airlock-dev/airlock/sandbox"
)

// kind is how a module is started.
type kind int

const (
	kindCommand kind = iota // a WASI command: _start
	kindRuby                // ruby.wasm's reactor build: _initialize, ruby-init, eval
)

// maxModuleBytes bounds a module read from a sandbox (the ruby build with
// its standard library is ~30 MiB).
const maxModuleBytes = 256 << 20

// program is a compiled module ready to instantiate.
type program struct {
	cm       wazero.CompiledModule
	kind     kind
	minPages uint32 // initial memory the module needs
}

// fileKey identifies a host file's content cheaply, so a registered module
// is not re-read and re-hashed on every start.
type fileKey struct {
	path  string
	size  int64
	mtime time.Time
}

type compileCall struct {
	done chan struct{}
	p    *program
	err  error
}

// errNotWasm marks bytes that are not a module wazero accepts.
var errNotWasm = errors.New("not a valid WebAssembly module")

// hostProgram returns the compiled module at a host path (a registered
// command), from the in-memory cache when the file is unchanged.
func (b *Backend) hostProgram(ctx context.Context, path string, k kind) (*program, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	key := fileKey{path: path, size: st.Size(), mtime: st.ModTime()}
	b.mu.Lock()
	sum, ok := b.files[key]
	p := b.modules[sum]
	b.mu.Unlock()
	if ok && p != nil {
		return p, nil
	}
	data, err := readLimited(path, os.Open)
	if err != nil {
		return nil, err
	}
	p, sum, err = b.compile(ctx, data, k)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.files[key] = sum
	b.mu.Unlock()
	return p, nil
}

// readLimited reads a whole module through open, refusing huge files.
func readLimited[F io.ReadCloser](path string, open func(string) (F, error)) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxModuleBytes {
		return nil, fmt.Errorf("module larger than %d MiB: %w", maxModuleBytes>>20, sandbox.ErrLimit)
	}
	return data, nil
}

// compile returns the program for data, compiling it at most once per
// process (and, with the disk cache, once per machine).
func (b *Backend) compile(ctx context.Context, data []byte, k kind) (*program, string, error) {
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:]) + fmt.Sprint(k)
	b.mu.Lock()
	if p := b.modules[sum]; p != nil {
		b.mu.Unlock()
		return p, sum, nil
	}
	if c, ok := b.compiles[sum]; ok {
		b.mu.Unlock()
		select {
		case <-c.done:
			return c.p, sum, c.err
		case <-ctx.Done():
			return nil, sum, ctx.Err()
		}
	}
	c := &compileCall{done: make(chan struct{})}
	b.compiles[sum] = c
	b.mu.Unlock()

	start := time.Now()
	c.p, c.err = b.compileNow(ctx, data, k)
	b.log.Debug("compiled module", "sha256", sum[:12], "bytes", len(data), "took", time.Since(start), "err", c.err)
	b.mu.Lock()
	delete(b.compiles, sum)
	if c.err == nil {
		b.modules[sum] = c.p
	}
	b.mu.Unlock()
	close(c.done)
	return c.p, sum, c.err
}

func (b *Backend) compileNow(ctx context.Context, data []byte, k kind) (*program, error) {
	b.compiled.Add(1)
	cm, err := b.rt.CompileModule(context.WithoutCancel(ctx), data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotWasm, err)
	}
	if err := b.checkImports(ctx, cm); err != nil {
		cm.Close(ctx)
		return nil, err
	}
	exports := cm.ExportedFunctions()
	switch k {
	case kindCommand:
		if _, ok := exports["_start"]; !ok {
			cm.Close(ctx)
			return nil, fmt.Errorf("%w: no _start export (not a WASI command)", errNotWasm)
		}
	case kindRuby:
		for _, name := range []string{"_initialize", rubyInitExport, rubyEvalExport, "cabi_realloc"} {
			if _, ok := exports[name]; !ok {
				cm.Close(ctx)
				return nil, fmt.Errorf("%w: ruby build lacks export %q", errNotWasm, name)
			}
		}
	}
	p := &program{cm: cm, kind: k}
	for _, m := range cm.ExportedMemories() {
		p.minPages = max(p.minPages, m.Min())
	}
	for _, m := range cm.ImportedMemories() {
		p.minPages = max(p.minPages, m.Min())
	}
	return p, nil
}

// checkImports refuses a module that needs any host function other than
// WASI preview 1 and the inert stubs of stubModules (which it instantiates
// on first use). Sockets are never given: wazero's WASI has no sock_open,
// and sock_accept/recv/send only act on preopened sockets, of which there
// are none.
func (b *Backend) checkImports(ctx context.Context, cm wazero.CompiledModule) error {
	need := map[string][]api.FunctionDefinition{}
	for _, f := range cm.ImportedFunctions() {
		mod, _, _ := f.Import()
		switch {
		case mod == "wasi_snapshot_preview1":
		case stubModules[mod]:
			need[mod] = append(need[mod], f)
		default:
			name, fn, _ := f.Import()
			return fmt.Errorf("%w: imports %s.%s, which the wasm sandbox does not provide", errNotWasm, name, fn)
		}
	}
	if ms := cm.ImportedMemories(); len(ms) > 0 {
		mod, name, _ := ms[0].Import()
		return fmt.Errorf("%w: imports memory %s.%s", errNotWasm, mod, name)
	}
	for mod, fns := range need {
		if err := b.ensureStubs(ctx, mod, fns); err != nil {
			return err
		}
	}
	return nil
}
