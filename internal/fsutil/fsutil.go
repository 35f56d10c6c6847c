// Package fsutil holds small file-tree helpers shared by the image store
// and the backends, for directories they made themselves. It must never
// follow a symlink nor act on a path a sandbox names.
package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// RemoveAll removes dir and everything below it. A tree written by a
// sandbox or unpacked from an image may hold read-only directories,
// which only root could empty as they are: they are made writable first
// (by their owner, this process) and removal tried again. It never
// follows a symlink (os.RemoveAll and filepath.WalkDir do not).
func RemoveAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || os.Geteuid() == 0 {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) // a directory (not a link: WalkDir does not follow)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
