//go:build unix

package main

import (
	"os"
	"syscall"
)

// execInPlace replaces this process with path; it returns only on failure.
func execInPlace(path string, argv []string) error {
	return syscall.Exec(path, argv, os.Environ())
}
