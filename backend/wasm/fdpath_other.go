//go:build !linux

package wasm

import "os"

// fdPath: without /proc, path rules are checked on the path as given
// (lexically) only; symlinks and hard links to denied or protected paths
// are not detected. Documented in the package's limits.
func fdPath(*os.File) (string, bool) { return "", false }
