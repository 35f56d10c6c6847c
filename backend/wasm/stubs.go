package wasm

import (
	"context"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// stubModules are host modules that CRuby's npm build (made for browsers and
// Node) imports besides WASI. Outside JavaScript they are inert: the
// resource table functions map a handle to itself, everything else traps
// with a clear message. None of them reaches the host.
var stubModules = map[string]bool{
	"rb-js-abi-host": true,
	"canonical_abi":  true,
}

// ensureStubs instantiates the stub module mod with the functions fns (the
// first module that imports it fixes its function set).
func (b *Backend) ensureStubs(ctx context.Context, mod string, fns []api.FunctionDefinition) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stubs[mod] {
		return b.checkStubs(mod, fns)
	}
	hb := b.rt.NewHostModuleBuilder(mod)
	for _, f := range fns {
		_, name, _ := f.Import()
		hb.NewFunctionBuilder().
			WithGoModuleFunction(stubFunc(mod, name, f), f.ParamTypes(), f.ResultTypes()).
			Export(name)
	}
	if _, err := hb.Instantiate(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("wasm: instantiate stub module %s: %w", mod, err)
	}
	b.stubs[mod] = true
	return nil
}

// checkStubs verifies an already instantiated stub module has fns.
func (b *Backend) checkStubs(mod string, fns []api.FunctionDefinition) error {
	m := b.rt.Module(mod)
	if m == nil {
		return fmt.Errorf("%w: stub module %s missing", errNotWasm, mod)
	}
	have := m.ExportedFunctionDefinitions()
	for _, f := range fns {
		_, name, _ := f.Import()
		d, ok := have[name]
		if !ok || !sameTypes(d.ParamTypes(), f.ParamTypes()) || !sameTypes(d.ResultTypes(), f.ResultTypes()) {
			return fmt.Errorf("%w: imports %s.%s, which the wasm sandbox does not provide", errNotWasm, mod, name)
		}
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stubFunc is the behaviour of one stub import.
func stubFunc(mod, name string, f api.FunctionDefinition) api.GoModuleFunction {
	one := len(f.ParamTypes()) == 1 && len(f.ResultTypes()) == 1
	switch {
	case mod == "canonical_abi" && one && (strings.HasPrefix(name, "resource_new_") || strings.HasPrefix(name, "resource_get_")):
		// The handle is the guest's value itself: get(new(v)) == v.
		return api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	case mod == "canonical_abi" && strings.HasPrefix(name, "resource_drop_") && len(f.ResultTypes()) == 0:
		return api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	default:
		msg := fmt.Sprintf("%s.%s: JavaScript is not available in the wasm sandbox", mod, name)
		return api.GoModuleFunc(func(context.Context, api.Module, []uint64) { panic(msg) })
	}
}
