package build

import "golang.org/x/sys/unix"

// isOpaque reports overlayfs's opaque mark (userxattr mounts).
func isOpaque(dir string) bool {
	b := make([]byte, 4)
	n, err := unix.Lgetxattr(dir, "user.overlay.opaque", b)
	return err == nil && n == 1 && b[0] == 'y'
}
