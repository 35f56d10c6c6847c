//go:build !linux

package images

import "io/fs"

func isWhiteout(fs.FileInfo) bool { return false }
func opaque(string) bool          { return false }
