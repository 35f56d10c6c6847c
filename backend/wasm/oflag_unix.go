//go:build unix

package wasm

import (
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// platformOflags adds the open flags only unix has a direct equivalent for.
func platformOflags(flag experimentalsys.Oflag, f int) int {
	if flag&experimentalsys.O_DIRECTORY != 0 {
		f |= syscall.O_DIRECTORY
	}
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		f |= syscall.O_NOFOLLOW
	}
	if flag&experimentalsys.O_NONBLOCK != 0 {
		f |= syscall.O_NONBLOCK
	}
	return f
}
