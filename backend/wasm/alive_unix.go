//go:build unix

package wasm

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid exists (signal 0 probes it).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
