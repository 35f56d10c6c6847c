package wasm

import (
	"io"
	"io/fs"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

// rootFile is a host file opened through an os.Root and handed to the
// guest. Reads, writes, seeks and directory listing are wazero's adapter
// over the *os.File (reused rather than re-implemented); the operations the
// adapter lacks for writable files are added here.
type rootFile struct {
	experimentalsys.File
	f      *os.File
	append bool
	quota  *quota    // the mount's disk limit, nil for none
	fds    *fdBudget // released on Close
	closed bool
}

// newRootFile wraps f, which was opened as rel inside root.
func newRootFile(root *os.Root, rel string, f *os.File, appendMode bool) (*rootFile, experimentalsys.Errno) {
	adapted, e := (&sysfs.AdaptFS{FS: &openedFS{root: root, rel: rel, first: f}}).
		OpenFile(".", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		f.Close()
		return nil, e
	}
	return &rootFile{File: adapted, f: f, append: appendMode}, 0
}

// openedFS hands the adapter the already opened file once; later opens
// (the adapter re-opens a directory to rewind it) go through the root again.
type openedFS struct {
	root  *os.Root
	rel   string
	first *os.File
}

func (o *openedFS) Open(string) (fs.File, error) {
	if f := o.first; f != nil {
		o.first = nil
		return f, nil
	}
	f, err := o.root.Open(o.rel)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (r *rootFile) IsAppend() bool { return r.append }

// SetAppend cannot change the host file's mode portably; it succeeds only
// when nothing changes.
func (r *rootFile) SetAppend(enable bool) experimentalsys.Errno {
	if enable == r.append {
		return 0
	}
	return experimentalsys.ENOSYS
}

func (r *rootFile) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	var cur int64
	if r.quota != nil {
		fi, err := r.f.Stat()
		if err != nil {
			return errno(err)
		}
		cur = fi.Size()
		if !r.quota.take(size - cur) {
			return errNoSpace
		}
	}
	if err := r.f.Truncate(size); err != nil {
		r.quota.give(size - cur)
		return errno(err)
	}
	r.quota.give(cur - size)
	return 0
}

// growth is how many bytes writing n bytes at off (-1: the current
// offset) adds to the file.
func (r *rootFile) growth(n int, off int64) (int64, experimentalsys.Errno) {
	fi, err := r.f.Stat()
	if err != nil {
		return 0, errno(err)
	}
	size := fi.Size()
	switch {
	case r.append:
		off = size
	case off < 0:
		if off, err = r.f.Seek(0, io.SeekCurrent); err != nil {
			return 0, errno(err)
		}
	}
	return max(off+int64(n)-size, 0), 0
}

// Write counts the file's growth against the mount's disk limit.
func (r *rootFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if r.quota == nil {
		return r.File.Write(buf)
	}
	g, e := r.growth(len(buf), -1)
	if e != 0 {
		return 0, e
	}
	if !r.quota.take(g) {
		return 0, errNoSpace
	}
	n, e := r.File.Write(buf)
	if n < len(buf) {
		r.quota.give(min(g, int64(len(buf)-n)))
	}
	return n, e
}

// Pwrite counts the file's growth against the mount's disk limit.
func (r *rootFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if r.quota == nil || off < 0 {
		return r.File.Pwrite(buf, off)
	}
	g, e := r.growth(len(buf), off)
	if e != 0 {
		return 0, e
	}
	if !r.quota.take(g) {
		return 0, errNoSpace
	}
	n, e := r.File.Pwrite(buf, off)
	if n < len(buf) {
		r.quota.give(min(g, int64(len(buf)-n)))
	}
	return n, e
}

// Close releases the process's open-file slot.
func (r *rootFile) Close() experimentalsys.Errno {
	if !r.closed {
		r.closed = true
		r.fds.release()
	}
	return r.File.Close()
}

func (r *rootFile) Sync() experimentalsys.Errno     { return errno(r.f.Sync()) }
func (r *rootFile) Datasync() experimentalsys.Errno { return errno(r.f.Sync()) }
