package idmap

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
)

var (
	errUnavailable = errdefs.ErrUnavailable
	errLimit       = errdefs.ErrLimit
)

// tryLock opens (creating) path and takes an exclusive flock without
// waiting: the file (nil when another holds it). The file is never
// removed, so no holder's lock is ever on a name another process can
// replace.
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}
