package wasm

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// runUnconfined runs the guest in a bare wazero runtime with ws mounted by
// wazero's own WithDirMount at the same path: the baseline each escape test
// first shows working.
func runUnconfined(t *testing.T, ws string, args ...string) string {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(guestModule(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(testBackend(t).cache))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	var out bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithArgs(append([]string{"guest"}, args...)...).
		WithStdout(&out).WithStderr(&out).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(ws, ws))
	rt.InstantiateWithConfig(ctx, data, cfg)
	return out.String()
}
