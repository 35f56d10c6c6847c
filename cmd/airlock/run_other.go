//go:build !linux

package main

import (
	"fmt"
	"runtime"

	"github.com/airlock-dev/airlock/errdefs"
)

// checkRunHost refuses, before anything starts, a backend that needs
// Linux: off Linux only wasm runs commands locally.
func checkRunHost(backend string) error {
	if backend == "wasm" {
		return nil
	}
	if backend == "" || backend == "auto" {
		backend = "native"
	}
	return fmt.Errorf("the %s backend needs Linux and this is %s: run WASI programs with --backend wasm, "+
		"or run sandboxes on a Linux host with `airlock serve` and use `airlock sandbox` from here: %w",
		backend, runtime.GOOS, errdefs.ErrUnavailable)
}
