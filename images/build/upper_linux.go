package build

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// kernelDirs are what every sandbox gets fresh: never part of a layer.
var kernelDirs = []string{"proc", "dev", "sys"}

// upperLayer turns an overlayfs upper directory (a RUN step's changes)
// into a layer tar at out: whiteouts (0/0 character devices) become
// .wh. entries, opaque directories a .wh..wh..opq entry, hard links
// links. skip are paths (relative) left out when they are empty files
// (mount points the sandbox made). It returns the layer and its number
// of entries.
func upperLayer(upper, out string, skip []string) (v1.Layer, int, error) {
	f, err := os.Create(out)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	links := map[[2]uint64]string{}
	n := 0
	err = filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if slices.Contains(kernelDirs, rel) {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if slices.Contains(skip, rel) && fi.Mode().IsRegular() && fi.Size() == 0 {
			return nil
		}
		if fi.Mode()&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0 {
			n++
			dir, base := path.Split(rel)
			return tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: fi.ModTime()})
		}
		h, err := entryHeader(p, rel, fi, st, links)
		if err != nil || h == nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n++
		if h.Typeflag == tar.TypeReg {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
		if fi.IsDir() && isOpaque(p) {
			n++
			return tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o600, ModTime: fi.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read the step's changes: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, 0, err
	}
	if err := f.Close(); err != nil {
		return nil, 0, err
	}
	l, err := tarball.LayerFromFile(out)
	return l, n, err
}

// entryHeader is the tar header of the upper directory's entry p (rel to
// it); nil for what is not image content (sockets, device nodes). A
// regular file's further hard links become links to the first (links).
func entryHeader(p, rel string, fi fs.FileInfo, st *syscall.Stat_t, links map[[2]uint64]string) (*tar.Header, error) {
	h, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return nil, nil // sockets and the like: not image content
	}
	h.Name = rel
	h.Uname, h.Gname = "", ""
	if st != nil {
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
	}
	h.Format = tar.FormatPAX
	switch {
	case fi.IsDir():
		h.Name += "/"
	case fi.Mode()&fs.ModeSymlink != 0:
		if h.Linkname, err = os.Readlink(p); err != nil {
			return nil, err
		}
	case fi.Mode().IsRegular() && st != nil && st.Nlink > 1:
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if first, ok := links[k]; ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
		} else {
			links[k] = rel
		}
	case fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return nil, nil // no device nodes in images
	}
	return h, nil
}
