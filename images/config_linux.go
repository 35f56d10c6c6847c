package images

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// isWhiteout reports overlayfs's whiteout: a 0/0 character device.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

func opaque(dir string) bool {
	b := make([]byte, 4)
	n, err := unix.Lgetxattr(dir, opaqueXattr, b)
	return err == nil && n == 1 && b[0] == 'y'
}
