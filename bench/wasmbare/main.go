// Command wasmbare is the baseline of the wasm backend's end-to-end
// benchmark: the least a Go program can do to run a WASI command with
// wazero (a compilation cache on disk, WASI, the current directory
// preopened, stdio passed through, the module's exit code returned).
// `airlock run --backend wasm` is measured beside it (scripts in bench/).
// It must stay bare: no policy, no sandbox, nothing the backend adds.
//
//	wasmbare MODULE.wasm [ARGS...]
//	wasmbare -write-hello PATH   # writes the tiny hello module used by the benchmarks
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/backend/wasm/wasmtest"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-write-hello" {
		if err := os.WriteFile(os.Args[2], wasmtest.HelloModule(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "wasmbare:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wasmbare MODULE.wasm [ARGS...] | -write-hello PATH")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[1:]))
}

func run(module string, args []string) int {
	ctx := context.Background()
	data, err := os.ReadFile(module)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmbare:", err)
		return 1
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(base, "airlock", "wasmbare"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmbare:", err)
		return 1
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	cwd, _ := os.Getwd()
	cfg := wazero.NewModuleConfig().
		WithArgs(args...).
		WithStdin(os.Stdin).WithStdout(os.Stdout).WithStderr(os.Stderr).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(cwd, cwd)).
		WithSysWalltime().WithSysNanotime()
	_, err = rt.InstantiateWithConfig(ctx, data, cfg)
	var exit *sys.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return int(exit.ExitCode())
	default:
		fmt.Fprintln(os.Stderr, "wasmbare:", err)
		return 1
	}
}
