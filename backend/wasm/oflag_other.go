//go:build !unix

package wasm

import experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

// platformOflags: without O_DIRECTORY and O_NOFOLLOW, rootFS checks the
// opened file's type itself.
func platformOflags(_ experimentalsys.Oflag, f int) int { return f }
