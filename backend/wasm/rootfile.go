package wasm

import (
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
}

// newRootFile wraps f, which was opened as rel inside root.
func newRootFile(root *os.Root, rel string, f *os.File, appendMode bool) (experimentalsys.File, experimentalsys.Errno) {
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
	return errno(r.f.Truncate(size))
}

func (r *rootFile) Sync() experimentalsys.Errno     { return errno(r.f.Sync()) }
func (r *rootFile) Datasync() experimentalsys.Errno { return errno(r.f.Sync()) }
