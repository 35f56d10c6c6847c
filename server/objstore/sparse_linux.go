package objstore

import (
	"errors"
	"os"
	"syscall"
)

// SEEK_DATA and SEEK_HOLE (lseek(2)).
const seekData, seekHole = 3, 4

// dataExtents calls fn with each data extent [start, end) of f below
// size, as the file system reports them (lseek SEEK_DATA/SEEK_HOLE); a
// file system without them reports the whole file as data.
func dataExtents(f *os.File, size int64, fn func(start, end int64) error) error {
	for off := int64(0); off < size; {
		start, err := f.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			return fn(off, size)
		}
		if start >= size {
			return nil
		}
		end, err := f.Seek(start, seekHole)
		if err != nil || end > size {
			end = size
		}
		if err := fn(start, end); err != nil {
			return err
		}
		off = end
	}
	return nil
}
