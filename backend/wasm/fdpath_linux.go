package wasm

import (
	"os"
	"strconv"
)

// fdPath is the path the kernel has for an open file (/proc/self/fd).
func fdPath(f *os.File) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || len(p) == 0 || p[0] != '/' {
		return "", false
	}
	return p, true
}
