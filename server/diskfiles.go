package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/airlock-dev/airlock/sandbox"
)

// The server itself holds files on a sandbox's disk volume: an archive
// upload's spool, a buffered exec's spilled output. An open file keeps
// the volume's filesystem alive however it is unmounted (the unmount is
// refused, then only detached lazily), so a pause that let them be would
// leave the image held for as long as a slow client takes, and the
// resume that follows at once would find it still mounted. A pause
// closes them first (diskFiles.close): the requests they served end
// (the upload answers 409, the sandbox was paused under it; a result
// being sent is cut off, never passed as complete), and the volume
// detaches at once.

// errDetached is what a server file on a detached volume answers.
var errDetached = fmt.Errorf("its disk was detached (the sandbox was paused or ended): %w", sandbox.ErrClosed)

// diskFiles are the server's open files on one disk volume.
type diskFiles struct {
	mu     sync.Mutex
	open   map[*diskFile]struct{}
	closed bool
}

// diskFile is an unlinked temporary file on a sandbox's disk, closed by
// the disk's detach when its user has not closed it before.
type diskFile struct {
	f     *os.File
	owner *diskFiles // nil: not on a volume (closed by its user only)
	mu    sync.Mutex
	cut   bool // closed by the detach
}

// createTemp makes an unlinked temporary file in dir, registered with
// files (nil: not on a volume). A detached volume makes none.
func (files *diskFiles) createTemp(dir, pattern string) (*diskFile, error) {
	if files != nil {
		files.mu.Lock()
		defer files.mu.Unlock()
		if files.closed {
			return nil, errDetached
		}
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // unlinked: nothing is left by a crash
	df := &diskFile{f: f, owner: files}
	if files != nil {
		if files.open == nil {
			files.open = map[*diskFile]struct{}{}
		}
		files.open[df] = struct{}{}
	}
	return df, nil
}

// close closes every file still open and refuses new ones: the volume is
// about to be detached. Idempotent.
func (files *diskFiles) close() {
	files.mu.Lock()
	open := files.open
	files.open, files.closed = nil, true
	files.mu.Unlock()
	for df := range open {
		df.mu.Lock()
		df.cut = true
		df.f.Close() // returns once no read or write of it is under way
		df.mu.Unlock()
	}
}

// wasCut reports whether the detach closed df.
func (df *diskFile) wasCut() bool {
	df.mu.Lock()
	defer df.mu.Unlock()
	return df.cut
}

// err turns the error of a file the detach closed into errDetached.
func (df *diskFile) err(err error) error {
	if err != nil && errors.Is(err, os.ErrClosed) && df.wasCut() {
		return errDetached
	}
	return err
}

func (df *diskFile) Read(p []byte) (int, error) {
	n, err := df.f.Read(p)
	return n, df.err(err)
}

func (df *diskFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := df.f.ReadAt(p, off)
	return n, df.err(err)
}

func (df *diskFile) Write(p []byte) (int, error) {
	n, err := df.f.Write(p)
	return n, df.err(err)
}

func (df *diskFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := df.f.WriteAt(p, off)
	return n, df.err(err)
}

func (df *diskFile) Seek(off int64, whence int) (int64, error) {
	n, err := df.f.Seek(off, whence)
	return n, df.err(err)
}

// Close closes the file (once, whoever comes first: its user or the
// detach).
func (df *diskFile) Close() error {
	if df.owner != nil {
		df.owner.mu.Lock()
		delete(df.owner.open, df)
		df.owner.mu.Unlock()
	}
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.cut {
		return nil
	}
	return df.f.Close()
}

var _ io.ReadWriteSeeker = (*diskFile)(nil)
