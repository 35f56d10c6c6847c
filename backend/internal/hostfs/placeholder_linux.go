package hostfs

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// RemovePlaceholders removes, newest first, the placeholders that are still
// ours: the same inode, still an empty regular file (nothing else may have
// been put there meanwhile).
func RemovePlaceholders(ph []Placeholder) error {
	var errs []error
	for i := len(ph) - 1; i >= 0; i-- {
		p := ph[i]
		var st unix.Stat_t
		if err := unix.Lstat(p.Path, &st); err != nil {
			continue
		}
		if st.Dev != p.Dev || st.Ino != p.Ino || st.Size != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := unix.Unlink(p.Path); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, &fs.PathError{Op: "remove placeholder", Path: p.Path, Err: err})
		}
	}
	return errors.Join(errs...)
}
